package middleware_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/middleware"
)

// TestSharedOptionsReachEveryMiddleware: one WithLogger is where Recover,
// Logging and Idempotent write, and one WithMeterProvider where
// Idempotent counts.
func TestSharedOptionsReachEveryMiddleware(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	logger := middleware.WithLogger(zap.New(core))
	mp, reader := metrictest.New(t)
	store := idempotency.NewMemory(time.Hour)
	var calls atomic.Int32
	h := acemq.Chain(middleware.Logging(logger), middleware.Idempotent(store, logger, middleware.WithMeterProvider(mp)),
		middleware.Recover(logger))(acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		if calls.Add(1) == 1 {
			panic("first")
		}
		return ack.Accept()
	}))
	for range 3 { // a panic made a retry, the handled one, then its duplicate
		h.ServeMessage(context.Background(), withID("m-1"))
	}
	var panicked, handled, duplicate int
	for _, e := range logs.All() {
		switch e.Message {
		case "acemq: handler panicked":
			panicked++
		case "acemq: handled":
			handled++
		case "acemq: duplicate accepted without calling the handler":
			duplicate++
		}
	}
	if panicked != 1 || handled != 3 || duplicate != 1 {
		t.Errorf("logged %d panics, %d handled, %d duplicates; want 1, 3, 1: %v", panicked, handled, duplicate, logs.All())
	}
	if got := metrictest.Sum(t, reader, middleware.MetricDuplicates, map[string]string{"queue": "orders"}); got != 1 {
		t.Errorf("%s = %d, want 1", middleware.MetricDuplicates, got)
	}
}

// TestDeprecatedIdempotentOptionsAreTheSharedOnes holds the old prefixed
// options to the new names: the same logger written to, the same meter
// provider counted in.
func TestDeprecatedIdempotentOptionsAreTheSharedOnes(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]func(*zap.Logger, metric.MeterProvider) []middleware.IdempotentOption{
		"new": func(l *zap.Logger, mp metric.MeterProvider) []middleware.IdempotentOption {
			return []middleware.IdempotentOption{middleware.WithLogger(l), middleware.WithMeterProvider(mp)}
		},
		"deprecated": func(l *zap.Logger, mp metric.MeterProvider) []middleware.IdempotentOption {
			//lint:ignore SA1019 the deprecated names are what this test holds to the new ones
			return []middleware.IdempotentOption{middleware.WithIdempotencyLogger(l), middleware.WithIdempotencyMeterProvider(mp)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zap.DebugLevel)
			mp, reader := metrictest.New(t)
			var calls atomic.Int32
			h := middleware.Idempotent(idempotency.NewMemory(time.Hour), opts(zap.New(core), mp)...)(answering(&calls, ack.Accept()))
			h.ServeMessage(context.Background(), withID("m-1"))
			h.ServeMessage(context.Background(), withID("m-1"))
			if calls.Load() != 1 {
				t.Fatalf("handler ran %d times, want once", calls.Load())
			}
			if got := logs.FilterMessage("acemq: duplicate accepted without calling the handler").Len(); got != 1 {
				t.Errorf("the logger given saw %d duplicate lines, want 1: %v", got, logs.All())
			}
			if got := metrictest.Sum(t, reader, middleware.MetricDuplicates, map[string]string{"queue": "orders"}); got != 1 {
				t.Errorf("the provider given counted %d duplicates, want 1", got)
			}
		})
	}
}

// TestNilOptionsMeanTheDefaults: Recover(nil) and Logging(nil), from when
// the logger was an argument, still compile and work, and a nil option
// among Idempotent's is skipped.
func TestNilOptionsMeanTheDefaults(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	h := acemq.Chain(middleware.Logging(nil), middleware.Idempotent(idempotency.NewMemory(time.Hour), nil, middleware.WithLogger(zap.NewNop())),
		middleware.Recover(nil))(answering(&calls, ack.Accept()))
	if a := h.ServeMessage(context.Background(), withID("m-1")); a.Outcome() != ack.OutcomeAccept || calls.Load() != 1 {
		t.Errorf("%v after %d calls, want an accept after one", a, calls.Load())
	}
	p := middleware.Recover(nil)(acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { panic("boom") }))
	if a := p.ServeMessage(context.Background(), withID("m-2")); a.Outcome() != ack.OutcomeRetry {
		t.Errorf("Recover(nil) on a panic: %v, want a retry", a)
	}
}
