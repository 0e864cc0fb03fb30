package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/middleware"
)

// plainStore is a Store and nothing more: no LeaseLeft.
type plainStore struct{ m *idempotency.Memory }

func (s plainStore) Claim(ctx context.Context, id string) (idempotency.ClaimResult, error) {
	return s.m.Claim(ctx, id)
}
func (s plainStore) Confirm(ctx context.Context, id string) error { return s.m.Confirm(ctx, id) }
func (s plainStore) Release(ctx context.Context, id string) error { return s.m.Release(ctx, id) }

// failingLease is a LeaseReporter whose LeaseLeft fails.
type failingLease struct{ *idempotency.Memory }

func (failingLease) LeaseLeft(context.Context, string) (time.Duration, error) {
	return 0, errors.New("the database is away")
}

func TestIdempotentCountsDuplicates(t *testing.T) {
	t.Parallel()
	mp, reader := metrictest.New(t)
	core, logs := observer.New(zapcore.DebugLevel)
	var hooked []string
	var calls atomic.Int32
	h := middleware.Idempotent(idempotency.NewMemory(time.Hour),
		middleware.WithMeterProvider(mp),
		middleware.WithLogger(zap.New(core)),
		middleware.WithDuplicateHook(func(_ context.Context, m *acemq.Message) { hooked = append(hooked, m.ID()) }),
	)(answering(&calls, ack.Accept()))
	ctx := context.Background()
	for _, id := range []string{"a", "a", "b", "a"} {
		if a := h.ServeMessage(ctx, withID(id)); a.Outcome() != ack.OutcomeAccept {
			t.Fatalf("%s: %v", id, a)
		}
	}
	if calls.Load() != 2 {
		t.Errorf("handler called %d times, want 2", calls.Load())
	}
	if fmt.Sprint(hooked) != "[a a]" {
		t.Errorf("hook saw %v, want [a a]", hooked)
	}
	if n := counted(t, reader, middleware.MetricDuplicates); n != 2 {
		t.Errorf("%s = %d, want 2", middleware.MetricDuplicates, n)
	}
	dupLogs := logs.FilterMessageSnippet("duplicate").All()
	if len(dupLogs) != 2 || dupLogs[0].Level != zapcore.DebugLevel || dupLogs[0].ContextMap()["id"] != "a" {
		t.Errorf("duplicate log lines %v, want two at debug with the id", dupLogs)
	}
}

// counted is the total of the counter name, whose every point must be of
// queue "orders".
func counted(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	return metrictest.SumEvery(t, reader, name, map[string]string{"queue": "orders"})
}

// Of many concurrent deliveries of one message, one runs the handler; the
// others find it in progress and are retried, never accepted unhandled.
// Once it is confirmed, the next delivery is a duplicate.
func TestIdempotentConcurrentDeliveriesRunOnce(t *testing.T) {
	t.Parallel()
	const deliveries = 100
	forEachStore(t, func(t *testing.T, store idempotency.Store) {
		var calls atomic.Int32
		// The handler holds its claim until every other delivery has
		// answered, so that none of them can find the id done.
		othersAnswered := make(chan struct{})
		var answered atomic.Int32
		h := middleware.Idempotent(store)(acemq.HandlerFunc(func(ctx context.Context, _ *acemq.Message) ack.Ack {
			calls.Add(1)
			*ctx.Value(ranKey{}).(*bool) = true
			select {
			case <-othersAnswered:
			case <-time.After(10 * time.Second):
				t.Error("the other deliveries did not answer while the handler ran")
			}
			return ack.Accept()
		}))
		var accepted, inProgress atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range deliveries {
			wg.Go(func() {
				ran := new(bool)
				ctx := context.WithValue(context.Background(), ranKey{}, ran)
				<-start
				a := h.ServeMessage(ctx, withID("m-1"))
				switch {
				case a.Outcome() == ack.OutcomeAccept:
					accepted.Add(1)
				case a.Outcome() == ack.OutcomeSnooze: // until the claim's lease can have ended
					inProgress.Add(1)
				default:
					t.Error(a)
				}
				if !*ran && answered.Add(1) == deliveries-1 {
					close(othersAnswered)
				}
			})
		}
		close(start)
		wg.Wait()
		if n, a, p := calls.Load(), accepted.Load(), inProgress.Load(); n != 1 || a != 1 || p != deliveries-1 {
			t.Fatalf("%d concurrent deliveries of one message: handler ran %d times, %d accepted, %d in progress; want 1, 1 and the rest",
				deliveries, n, a, p)
		}
		if a := h.ServeMessage(context.Background(), withID("m-1")); a.Outcome() != ack.OutcomeAccept || calls.Load() != 1 {
			t.Errorf("the delivery after: %v after %d calls, want a duplicate", a, calls.Load())
		}
	})
}

// ranKey holds, in a delivery's context, whether the handler ran on it.
type ranKey struct{}

// Ids a publisher may send: each is handled once, then done, a
// duplicate, with no panic and no error, on either store.
func TestIdempotentOddIDs(t *testing.T) {
	t.Parallel()
	mib := strings.Repeat("0123456789abcdef", 1<<16)
	ids := []string{
		mib, mib[:len(mib)-1] + "!", strings.Repeat("x", 256),
		"a\x00b", "\x00", "\xff\xfe", "caf\xc3", "line\nbreak\r\n", "tab\there",
		`'quoted' "twice"`, `x'); DROP TABLE acemq_idempotency; --`, "$1", "%s%v", `\\`, "sha256:", "é",
	}
	forEachStore(t, func(t *testing.T, store idempotency.Store) {
		core, logs := observer.New(zapcore.DebugLevel)
		var calls atomic.Int32
		h := middleware.Idempotent(store, middleware.WithLogger(zap.New(core)))(answering(&calls, ack.Accept()))
		for _, id := range ids {
			for delivery := range 2 {
				if a := h.ServeMessage(context.Background(), withID(id)); a.Outcome() != ack.OutcomeAccept {
					t.Fatalf("delivery %d of %q: %v", delivery, short(id), a)
				}
			}
		}
		if n := calls.Load(); n != int32(len(ids)) {
			t.Errorf("handler ran %d times for %d ids delivered twice each, want once per id", n, len(ids))
		}
		if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 0 {
			t.Errorf("%d errors logged: %v", n, logs.FilterLevelExact(zapcore.ErrorLevel).All())
		}
		// A megabyte id makes a log line of a hundred-odd bytes, not a megabyte.
		for _, e := range logs.FilterMessageSnippet("duplicate").All() {
			if id := e.ContextMap()["id"].(string); len(id) > 200 {
				t.Errorf("a duplicate's log line carries an id of %d bytes", len(id))
			}
		}
	})
}

// A database that is down refuses the claim: the message is retried under
// the server's policy, not accepted, the handler does not run, and the
// reason says why without the password.
func TestIdempotentDatabaseDown(t *testing.T) {
	t.Parallel()
	pool := brokertest.RefusedPool(t)
	store, err := idempotency.NewPostgres(pool)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	h := middleware.Idempotent(store)(answering(&calls, ack.Accept()))
	a := h.ServeMessage(context.Background(), withID("m-1"))
	if a.Outcome() != ack.OutcomeRetry || calls.Load() != 0 {
		t.Fatalf("%v after %d handler calls, want a retry without calling the handler", a, calls.Load())
	}
	msg := a.Err().Error()
	for _, want := range []string{"idempotency claim failed, the handler did not run", `"m-1"`, "connect"} {
		if !strings.Contains(msg, want) {
			t.Errorf("retry reason %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "secret") {
		t.Errorf("retry reason %q shows the password", msg)
	}
}

// short is an id cut for a test's message.
func short(id string) string {
	if len(id) > 40 {
		return fmt.Sprintf("%.40s... (%d bytes)", id, len(id))
	}
	return id
}

// storeKinds are the stores forEachStore runs a test on.
var storeKinds = []string{"memory", "postgres"}

func TestIdempotentNilStorePanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Idempotent(nil) did not panic")
		}
	}()
	middleware.Idempotent(nil)
}

// TestIdempotentNeedsAnID: a message whose id was made up for this
// delivery is neither claimed nor handled: it asks the server to stamp the
// id on first.
func TestIdempotentNeedsAnID(t *testing.T) {
	t.Parallel()
	store := idempotency.NewMemory(time.Minute)
	var calls atomic.Int32
	h := middleware.Idempotent(store)(acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
		calls.Add(1)
		return ack.Accept()
	}))
	m := acemq.NewMessage("orders", []byte(`{}`), nil)
	if !m.IDIsNew() {
		t.Fatal("a message with no id reads as having one")
	}
	a := h.ServeMessage(context.Background(), m)
	if a.Outcome() != ack.OutcomeRetry || !errors.Is(a.Err(), acemq.ErrNeedsID) || calls.Load() != 0 {
		t.Errorf("got %v after %d calls, want a retry with ErrNeedsID and no call", a, calls.Load())
	}
	if claim, err := store.Claim(context.Background(), m.ID()); err != nil || claim != idempotency.Claimed {
		t.Errorf("the made-up id was claimed: %v %v", claim, err)
	}
}
