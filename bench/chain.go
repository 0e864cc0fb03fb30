package main

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// chainCost measures one message through a mux and the default chain
// (decode, max age, recover) to an accept-all handler, in process: the
// allocations and time acemq's handler path adds to each message, apart
// from any transport.
func chainCost(body []byte) testing.BenchmarkResult {
	mux := acemq.NewMux()
	mux.Use(defaultChain()...)
	mux.HandleFunc("bench", func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })
	m := acemq.NewMessage("bench", body, map[string]any{
		acemq.HeaderID: newID(), acemq.HeaderAttempt: int64(1), acemq.HeaderCreated: time.Now().UnixMilli(),
	})
	ctx := context.Background()
	return testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if a := mux.ServeMessage(ctx, m); a.Outcome() != ack.OutcomeAccept {
				b.Fatalf("not accepted: %v", a)
			}
		}
	})
}
