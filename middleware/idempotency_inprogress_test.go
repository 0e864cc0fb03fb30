package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/transport/memory"
)

// An id claimed elsewhere and not settled is snoozed, not retried: no
// attempt spent, the handler not called, counted and logged, whatever the
// store; what follows depends on what the other claim becomes.
func TestIdempotentInProgress(t *testing.T) {
	t.Parallel()
	mib := strings.Repeat("0123456789abcdef", 1<<16)
	tests := []struct {
		name  string
		id    string
		then  func(ctx context.Context, s idempotency.Store, id string) error // the other consumer
		calls int32                                                           // handler calls on the next delivery
	}{
		{"then confirmed: a duplicate", "m-1", func(ctx context.Context, s idempotency.Store, id string) error { return s.Confirm(ctx, id) }, 0},
		{"then released: handled", "m-1", func(ctx context.Context, s idempotency.Store, id string) error { return s.Release(ctx, id) }, 1},
		{"a long id, then released", mib, func(ctx context.Context, s idempotency.Store, id string) error { return s.Release(ctx, id) }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forEachStore(t, func(t *testing.T, store idempotency.Store) {
				ctx := context.Background()
				mp, reader := metrictest.New(t)
				core, logs := observer.New(zapcore.DebugLevel)
				var hooked, calls atomic.Int32
				h := middleware.Idempotent(store,
					middleware.WithMeterProvider(mp),
					middleware.WithLogger(zap.New(core)),
					middleware.WithDuplicateHook(func(context.Context, *acemq.Message) { hooked.Add(1) }),
				)(answering(&calls, ack.Accept()))
				if r, err := store.Claim(ctx, tt.id); r != idempotency.Claimed || err != nil {
					t.Fatalf("the other consumer's Claim = %v, %v", r, err)
				}

				a := h.ServeMessage(ctx, withID(tt.id))
				wait, _ := a.After()
				// The lease left, a minute at most, and a second: more
				// than the second, since the lease is far from its end.
				if a.Outcome() != ack.OutcomeSnooze || wait <= time.Second || wait > idempotency.DefaultLease+time.Second {
					t.Fatalf("delivery of an id in progress elsewhere: %v after %v, want a snooze of the lease left and a second", a, wait)
				}
				if calls.Load() != 0 || hooked.Load() != 0 {
					t.Errorf("handler called %d times, duplicate hook %d times; want neither", calls.Load(), hooked.Load())
				}
				if n := counted(t, reader, middleware.MetricInProgress); n != 1 {
					t.Errorf("%s = %d, want 1", middleware.MetricInProgress, n)
				}
				if n := counted(t, reader, middleware.MetricDuplicates); n != 0 {
					t.Errorf("%s = %d, want 0", middleware.MetricDuplicates, n)
				}
				inProgressLogs := logs.FilterMessageSnippet("in progress elsewhere; snoozed").All()
				if len(inProgressLogs) != 1 || inProgressLogs[0].Level != zapcore.InfoLevel ||
					len(inProgressLogs[0].ContextMap()["id"].(string)) > 200 ||
					inProgressLogs[0].ContextMap()["wait"] != wait || inProgressLogs[0].ContextMap()["lease_known"] != true {
					t.Errorf("in-progress log lines %v, want one at info with the id cut short and the wait %v", inProgressLogs, wait)
				}

				if err := tt.then(ctx, store, tt.id); err != nil {
					t.Fatal(err)
				}
				if a := h.ServeMessage(ctx, withID(tt.id)); a.Outcome() != ack.OutcomeAccept || calls.Load() != tt.calls {
					t.Errorf("the next delivery: %v after %d handler calls, want accept after %d", a, calls.Load(), tt.calls)
				}
				if want := 1 - int64(tt.calls); counted(t, reader, middleware.MetricDuplicates) != want || int64(hooked.Load()) != want {
					t.Errorf("%d duplicates counted, %d hooked; want %d", counted(t, reader, middleware.MetricDuplicates), hooked.Load(), want)
				}
			})
		})
	}
}

// A claim whose consumer died holds its id until the lease ends: each
// delivery before then is snoozed for exactly the lease left and a second,
// by the store's clock; the first after it is handled.
func TestIdempotentInProgressUntilTheLeaseEnds(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			clock := memory.NewClock(start)
			store := storeOf(t, kind, idempotency.WithLease(time.Minute), idempotency.WithClock(clock))
			var calls atomic.Int32
			h := middleware.Idempotent(store, middleware.WithLogger(zap.NewNop()))(answering(&calls, ack.Accept()))
			ctx := context.Background()
			const id = "m-1"
			_, _ = store.Claim(ctx, id) // and its consumer is killed
			for _, step := range []struct {
				at    time.Duration // since the claim
				want  ack.Outcome
				wait  time.Duration // of a snooze
				calls int32
			}{
				{0, ack.OutcomeSnooze, time.Minute + time.Second, 0},
				{20 * time.Second, ack.OutcomeSnooze, 41 * time.Second, 0},
				{time.Minute - time.Microsecond, ack.OutcomeSnooze, time.Second + time.Microsecond, 0},
				{time.Minute, ack.OutcomeAccept, 0, 1},               // the lease ended
				{time.Minute + time.Second, ack.OutcomeAccept, 0, 1}, // a duplicate now
			} {
				clock.Advance(start.Add(step.at).Sub(clock.Now()))
				a := h.ServeMessage(ctx, withID(id))
				wait, _ := a.After()
				if a.Outcome() != step.want || wait != step.wait || calls.Load() != step.calls {
					t.Fatalf("%v after the claim: %v for %v after %d handler calls, want %v for %v after %d",
						step.at, a, wait, calls.Load(), step.want, step.wait, step.calls)
				}
			}
		})
	}
}

// The snoozes are bounded: a message found in progress after as many
// snoozes as allowed (its x-acemq-snoozes, whatever made them) is retried
// under the policy, spending an attempt, with ErrInProgress and a warning.
func TestIdempotentInProgressSnoozesAreBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		opts    []middleware.IdempotentOption
		snoozes int
		retried bool
	}{
		{"the first time", nil, 0, false},
		{"the last snooze allowed", nil, middleware.DefaultInProgressSnoozes - 1, false},
		{"past the default", nil, middleware.DefaultInProgressSnoozes, true},
		{"far past the default", nil, 40, true},
		{"a limit of two, reached", []middleware.IdempotentOption{middleware.WithInProgressSnoozes(2)}, 2, true},
		{"a limit of two, not reached", []middleware.IdempotentOption{middleware.WithInProgressSnoozes(2)}, 1, false},
		{"no snoozes at all", []middleware.IdempotentOption{middleware.WithInProgressSnoozes(0)}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := idempotency.NewMemory(time.Hour)
			core, logs := observer.New(zapcore.InfoLevel)
			var calls atomic.Int32
			h := middleware.Idempotent(store, append(tt.opts, middleware.WithLogger(zap.New(core)))...)(answering(&calls, ack.Accept()))
			ctx := context.Background()
			_, _ = store.Claim(ctx, "m-1")
			headers := map[string]any{acemq.HeaderID: "m-1"}
			if tt.snoozes > 0 {
				headers[acemq.HeaderSnoozes] = int64(tt.snoozes)
			}
			a := h.ServeMessage(ctx, acemq.NewMessage("orders", []byte(`{}`), headers))
			if calls.Load() != 0 {
				t.Fatalf("the handler ran %d times for an id in progress", calls.Load())
			}
			if !tt.retried {
				if a.Outcome() != ack.OutcomeSnooze {
					t.Errorf("after %d snoozes: %v, want a snooze", tt.snoozes, a)
				}
				return
			}
			if a.Outcome() != ack.OutcomeRetry || !errors.Is(a.Err(), idempotency.ErrInProgress) {
				t.Fatalf("after %d snoozes: %v, want a retry with ErrInProgress", tt.snoozes, a)
			}
			msg := a.Err().Error()
			for _, want := range []string{"in progress elsewhere", `"m-1"`, fmt.Sprintf("after %d snoozes", tt.snoozes), "the handler did not run"} {
				if !strings.Contains(msg, want) {
					t.Errorf("retry reason %q does not say %q", msg, want)
				}
			}
			warned := logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("still in progress elsewhere").All()
			if len(warned) != 1 || warned[0].ContextMap()["snoozes"] != int64(tt.snoozes) {
				t.Errorf("warnings %v, want one with the snoozes", warned)
			}
		})
	}
}

// The retry past the snoozes carries the id cut short: it becomes a dead
// letter's reason.
func TestIdempotentInProgressRetryReasonIsShort(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("0123456789abcdef", 1<<16)
	store := idempotency.NewMemory(time.Hour)
	_, _ = store.Claim(context.Background(), id)
	var calls atomic.Int32
	h := middleware.Idempotent(store, middleware.WithInProgressSnoozes(0), middleware.WithLogger(zap.NewNop()))(answering(&calls, ack.Accept()))
	a := h.ServeMessage(context.Background(), withID(id))
	msg := a.Err().Error()
	if a.Outcome() != ack.OutcomeRetry || !strings.Contains(msg, `"`+id[:100]) || len(msg) > 500 {
		t.Errorf("%v with a reason of %d bytes %.200q, want a retry naming the id's start in under 500", a, len(msg), msg)
	}
}

// A store that cannot say how long the claim holds, or fails to, is
// waited out for a whole default lease, and says so.
func TestIdempotentInProgressLeaseUnknown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		store func(*idempotency.Memory) idempotency.Store
		warn  bool
	}{
		{"a store that is no LeaseReporter", func(m *idempotency.Memory) idempotency.Store { return plainStore{m} }, false},
		{"a LeaseLeft that fails", func(m *idempotency.Memory) idempotency.Store { return failingLease{m} }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mem := idempotency.NewMemory(time.Hour, idempotency.WithLease(time.Second))
			store := tt.store(mem)
			_, _ = store.Claim(context.Background(), "m-1")
			core, logs := observer.New(zapcore.InfoLevel)
			var calls atomic.Int32
			h := middleware.Idempotent(store, middleware.WithLogger(zap.New(core)))(answering(&calls, ack.Accept()))
			a := h.ServeMessage(context.Background(), withID("m-1"))
			if wait, _ := a.After(); a.Outcome() != ack.OutcomeSnooze || wait != idempotency.DefaultLease+time.Second || calls.Load() != 0 {
				t.Fatalf("%v for %v after %d calls, want a snooze of a default lease and a second", a, wait, calls.Load())
			}
			snoozed := logs.FilterMessageSnippet("snoozed").All()
			if len(snoozed) != 1 || snoozed[0].ContextMap()["lease_known"] != false {
				t.Errorf("snooze lines %v, want one that says the lease was not known", snoozed)
			}
			if n := logs.FilterMessageSnippet("lease unknown").Len(); (n == 1) != tt.warn {
				t.Errorf("%d warnings of an unknown lease, want one: %v", n, tt.warn)
			}
		})
	}
}

// A store answering something that is no ClaimResult is not taken for
// "done": the message is retried, the handler not called, nothing settled.
func TestIdempotentUnknownClaimResult(t *testing.T) {
	t.Parallel()
	store := newFlakyStore()
	store.claimResult = 7
	var calls atomic.Int32
	a := middleware.Idempotent(store)(answering(&calls, ack.Accept())).ServeMessage(context.Background(), withID("m-1"))
	if a.Outcome() != ack.OutcomeRetry || calls.Load() != 0 || store.confirms.Load()+store.releases.Load() != 0 {
		t.Fatalf("%v after %d calls and %d settles, want a retry, no call, no settle",
			a, calls.Load(), store.confirms.Load()+store.releases.Load())
	}
	if !strings.Contains(a.Err().Error(), "ClaimResult(7)") {
		t.Errorf("retry reason %q does not show the store's answer", a.Err())
	}
}
