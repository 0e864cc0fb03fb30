package acemq_test

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport/memory"
)

// TestRunStoppedWhileStarting: Run's context ended while it was still
// subscribing (the second queue's consume refused for now, waited on) is
// a clean stop: Run returns nil, not the context's error dressed as a
// consume's, and leaves nothing running (the first queue's breaker marker
// keeper included: goleak in TestMain).
func TestRunStoppedWhileStarting(t *testing.T) {
	t.Parallel()
	b := memory.New()
	defer b.Close()
	conn := b.Connect()
	defer conn.Close()
	b.SetConnectionLimit(2) // the Conn and the first subscription
	mux := acemq.NewMux()
	ok := func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() }
	mux.HandleFunc("a-orders", ok)
	mux.HandleFunc("b-refunds", ok)
	srv := &acemq.Server{Transport: conn, Handler: mux, Queues: map[string]acemq.QueueConfig{"a-orders": {Breaker: &acemq.Breaker{}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	polltest.Eventually(t, "one queue consumed, the other refused", func() bool {
		info, err := conn.Inspect(context.Background(), "a-orders")
		return err == nil && info.Consumers == 1
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil: a stop before it started is a clean stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
