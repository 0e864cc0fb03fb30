package middleware_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/middleware"
)

// BenchmarkIdempotent is the middleware's overhead on a memory store, next
// to the bare handler: a first delivery (claim, handler, confirm), a
// failing one (claim, handler, release) and a duplicate (claim done).
func BenchmarkIdempotent(b *testing.B) {
	ok := acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })
	failed := acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { return ack.Requeue() })
	// Twice as many messages as the store holds, so each comes back after
	// it was evicted: every delivery is a first one.
	msgs := make([]*acemq.Message, 1<<14)
	for i := range msgs {
		msgs[i] = withID("m-" + strconv.Itoa(i))
	}
	ctx := context.Background()
	run := func(b *testing.B, h acemq.Handler, msgs []*acemq.Message) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			h.ServeMessage(ctx, msgs[i%len(msgs)])
			i++
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, ok, msgs) })
	b.Run("first", func(b *testing.B) {
		store := idempotency.NewMemory(time.Hour, idempotency.WithMaxEntries(len(msgs)/2))
		run(b, middleware.Idempotent(store)(ok), msgs)
	})
	b.Run("released", func(b *testing.B) {
		run(b, middleware.Idempotent(idempotency.NewMemory(time.Hour))(failed), msgs[:1])
	})
	b.Run("duplicate", func(b *testing.B) {
		store := idempotency.NewMemory(time.Hour)
		_ = store.Confirm(ctx, msgs[0].ID())
		run(b, middleware.Idempotent(store)(ok), msgs[:1])
	})
}

// BenchmarkIdempotentPostgres is a first delivery through the middleware
// on a PostgreSQL store: two round trips, a claim and a confirm.
func BenchmarkIdempotentPostgres(b *testing.B) {
	ok := acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })
	h := middleware.Idempotent(postgresStore(b))(ok)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if a := h.ServeMessage(ctx, withID("m-"+strconv.Itoa(i))); a.Outcome() != ack.OutcomeAccept {
			b.Fatal(a)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
