package middleware_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/middleware"
)

// withID is a delivery of message id on queue "orders".
func withID(id string) *acemq.Message {
	return acemq.NewMessage("orders", []byte(`{}`), map[string]any{acemq.HeaderID: id})
}

// answering is a handler that counts its calls and answers with a.
func answering(calls *atomic.Int32, a ack.Ack) acemq.Handler {
	return acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
		calls.Add(1)
		return a
	})
}

// flakyStore is a memory store whose calls fail on demand and which records
// whether each settle saw a live context.
type flakyStore struct {
	*idempotency.Memory
	claimErr, confirmErr, releaseErr error
	claimResult                      idempotency.ClaimResult // answered instead of the store's, when set
	settledCtxErr                    error
	confirms, releases               atomic.Int32
}

func newFlakyStore() *flakyStore { return &flakyStore{Memory: idempotency.NewMemory(time.Hour)} }

func (s *flakyStore) Claim(ctx context.Context, id string) (idempotency.ClaimResult, error) {
	if s.claimErr != nil {
		return 0, s.claimErr
	}
	if s.claimResult != 0 {
		return s.claimResult, nil
	}
	return s.Memory.Claim(ctx, id)
}

func (s *flakyStore) Confirm(ctx context.Context, id string) error {
	s.confirms.Add(1)
	s.settledCtxErr = ctx.Err()
	if s.confirmErr != nil {
		return s.confirmErr
	}
	return s.Memory.Confirm(ctx, id)
}

func (s *flakyStore) Release(ctx context.Context, id string) error {
	s.releases.Add(1)
	s.settledCtxErr = ctx.Err()
	if s.releaseErr != nil {
		return s.releaseErr
	}
	return s.Memory.Release(ctx, id)
}

func TestIdempotentSettlesByOutcome(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		answer    ack.Ack
		confirmed bool // else released: the next delivery runs the handler
	}{
		{ack.Accept(), true},
		{ack.Retry(boom), false},
		{ack.DeadLetter(boom), false},
		{ack.Park(boom), false},
		{ack.Requeue(), false},
	}
	for _, tt := range tests {
		t.Run(tt.answer.Outcome().String(), func(t *testing.T) {
			t.Parallel()
			store := newFlakyStore()
			var calls atomic.Int32
			h := middleware.Idempotent(store)(answering(&calls, tt.answer))
			ctx := context.Background()
			for delivery := range 2 {
				if a := h.ServeMessage(ctx, withID("m-1")); delivery == 0 && a != tt.answer {
					t.Fatalf("first delivery: %v, want the handler's %v", a, tt.answer)
				} else if delivery == 1 && tt.confirmed && a.Outcome() != ack.OutcomeAccept {
					t.Fatalf("duplicate: %v, want accept", a)
				}
			}
			wantCalls, wantConfirms, wantReleases := int32(2), int32(0), int32(2)
			if tt.confirmed {
				wantCalls, wantConfirms, wantReleases = 1, 1, 0
			}
			if n := calls.Load(); n != wantCalls {
				t.Errorf("handler called %d times over two deliveries, want %d", n, wantCalls)
			}
			if c, r := store.confirms.Load(), store.releases.Load(); c != wantConfirms || r != wantReleases {
				t.Errorf("%d confirms and %d releases, want %d and %d", c, r, wantConfirms, wantReleases)
			}
		})
	}
}

func TestIdempotentReleasesOnPanic(t *testing.T) {
	t.Parallel()
	store := newFlakyStore()
	var calls atomic.Int32
	h := middleware.Idempotent(store)(acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
		if calls.Add(1) == 1 {
			panic("first time")
		}
		return ack.Accept()
	}))
	func() {
		defer func() {
			if r := recover(); r != "first time" {
				t.Fatalf("recovered %v, want the handler's panic to go on", r)
			}
		}()
		h.ServeMessage(context.Background(), withID("m-1"))
	}()
	if a := h.ServeMessage(context.Background(), withID("m-1")); a.Outcome() != ack.OutcomeAccept || calls.Load() != 2 {
		t.Fatalf("redelivery after the panic: %v after %d calls; the claim was not released", a, calls.Load())
	}
	if store.releases.Load() != 1 {
		t.Errorf("%d releases, want 1", store.releases.Load())
	}
}

func TestIdempotentStoreFailures(t *testing.T) {
	t.Parallel()
	down := errors.New("store down")
	tests := []struct {
		name       string
		fail       func(*flakyStore)
		answer     ack.Ack
		want       ack.Outcome
		wantCalls  int32
		wantErrLog string
	}{
		{"claim fails: retry, handler not called", func(s *flakyStore) { s.claimErr = down }, ack.Accept(), ack.OutcomeRetry, 0, ""},
		{"confirm fails: still accepted, logged", func(s *flakyStore) { s.confirmErr = down }, ack.Accept(), ack.OutcomeAccept, 1, "confirm failed"},
		{"release fails: the handler's retry, logged", func(s *flakyStore) { s.releaseErr = down }, ack.Retry(errors.New("x")), ack.OutcomeRetry, 1, "release failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := newFlakyStore()
			tt.fail(store)
			core, logs := observer.New(zap.ErrorLevel)
			var calls atomic.Int32
			h := middleware.Idempotent(store, middleware.WithLogger(zap.New(core)))(answering(&calls, tt.answer))
			a := h.ServeMessage(context.Background(), withID("m-1"))
			if a.Outcome() != tt.want || calls.Load() != tt.wantCalls {
				t.Fatalf("%v after %d calls, want %v after %d", a, calls.Load(), tt.want, tt.wantCalls)
			}
			if tt.want == ack.OutcomeRetry && tt.wantCalls == 0 && !errors.Is(a.Err(), down) {
				t.Errorf("retry error %v does not wrap the store's", a.Err())
			}
			entries := logs.All()
			switch {
			case tt.wantErrLog == "" && len(entries) != 0:
				t.Errorf("unexpected log: %v", entries)
			case tt.wantErrLog != "" && (len(entries) != 1 || !strings.Contains(entries[0].Message, tt.wantErrLog) ||
				entries[0].ContextMap()["id"] != "m-1" || entries[0].ContextMap()["error"] != down.Error()):
				t.Errorf("log %v, want one entry with %q, the id and the error", entries, tt.wantErrLog)
			}
		})
	}
}

// A release that failed leaves the claim until its lease ends: the retry
// that comes sooner is in progress and waits for that end, never accepted
// unhandled.
func TestIdempotentFailedReleaseIsNotADuplicate(t *testing.T) {
	t.Parallel()
	store := newFlakyStore()
	store.releaseErr = errors.New("store down")
	var calls atomic.Int32
	h := middleware.Idempotent(store)(answering(&calls, ack.Retry(errors.New("x"))))
	h.ServeMessage(context.Background(), withID("m-1"))
	a := h.ServeMessage(context.Background(), withID("m-1"))
	if a.Outcome() != ack.OutcomeSnooze || calls.Load() != 1 {
		t.Errorf("the retry after a failed release: %v after %d calls, want a snooze after 1", a, calls.Load())
	}
}

// A handler cut off by shutdown still gets its claim settled.
func TestIdempotentSettlesOnACancelledContext(t *testing.T) {
	t.Parallel()
	for _, answer := range []ack.Ack{ack.Accept(), ack.Retry(context.Canceled)} {
		store := newFlakyStore()
		ctx, cancel := context.WithCancel(context.Background())
		h := middleware.Idempotent(store)(acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
			cancel()
			return answer
		}))
		h.ServeMessage(ctx, withID("m-1"))
		if store.confirms.Load()+store.releases.Load() != 1 || store.settledCtxErr != nil {
			t.Errorf("%v: settled %d times, context error %v", answer.Outcome(), store.confirms.Load()+store.releases.Load(), store.settledCtxErr)
		}
	}
	// A bare Memory store gets the handler's context as it is, since it never
	// reads it: a cancelled one settles the claim all the same.
	for _, tt := range []struct {
		answer    ack.Ack
		wantCalls int32
	}{{ack.Accept(), 1}, {ack.Retry(context.Canceled), 2}} {
		var calls atomic.Int32
		h := middleware.Idempotent(idempotency.NewMemory(time.Hour))(answering(&calls, tt.answer))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		h.ServeMessage(ctx, withID("m-1"))
		h.ServeMessage(ctx, withID("m-1"))
		if n := calls.Load(); n != tt.wantCalls {
			t.Errorf("%v on a cancelled context: handler ran %d times over two deliveries, want %d", tt.answer.Outcome(), n, tt.wantCalls)
		}
	}
}
