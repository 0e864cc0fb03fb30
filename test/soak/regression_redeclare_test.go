package soak_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport/memory"
)

// TestSoakRegressionDeletedQueueDeclaredAgainAtOnce is the soak's finding
// (issue 29, seed 1796215466699503418): a queue deleted under a server was
// declared and consumed again only once every worker of the cancelled
// subscription had ended. A long handler (up to HandlerTimeout, 25
// minutes by default) kept the queue missing for as long as it ran:
// publishes to it were unroutable (dropped by the broker when not
// mandatory), and copies on its rungs expired into nothing. Here one
// handler runs until the test releases it: the queue is back at once all
// the same, CheckReady says what it waits for, a message published
// meanwhile waits in it, and it is handled once the handler returns (the
// queue's concurrency of one kept: never two handlers at once).
func TestSoakRegressionDeletedQueueDeclaredAgainAtOnce(t *testing.T) {
	const q = "soak.regress.deleted"
	b := memory.New()
	defer b.Close()
	conn := b.Connect()
	defer conn.Close()
	var calls, running, most atomic.Int64
	release := make(chan struct{})
	mux := acemq.NewMux()
	mux.HandleFunc(q, func(ctx context.Context, m *acemq.Message) ack.Ack {
		calls.Add(1)
		if n := running.Add(1); n > most.Load() {
			most.Store(n)
		}
		defer running.Add(-1)
		if m.ID() == "r-1" {
			<-release // a long job: a report, a big import
		}
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: conn, Handler: mux, Logger: zap.NewNop(),
		Queues: map[string]acemq.QueueConfig{q: {Concurrency: 1}}}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}()
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	pub := &acemq.Publisher{Transport: conn, Mandatory: true}
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{ID: "r-1", RoutingKey: q, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	polltest.Within(t, 10*time.Second, "the handler started", func() bool { return calls.Load() == 1 })
	b.DeleteQueue(q)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	polltest.Within(t, 30*time.Second, q+" declared again while a handler of its runs", func() bool {
		_, ok := b.Queue(q)
		return ok
	})
	polltest.Within(t, 30*time.Second, "CheckReady saying it awaits the handlers", func() bool {
		return errors.Is(srv.CheckReady(), engine.ErrAwaitingHandlers)
	})
	// A message published now waits in the queue declared again.
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{ID: "r-2", RoutingKey: q, Body: []byte("{}")}); err != nil {
		t.Fatalf("publish after the queue was declared again: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d handler calls before the running one returned, want 1: the queue's concurrency is 1", n)
	}
	close(release)
	released = true
	polltest.Within(t, 30*time.Second, "r-2 handled and the server ready", func() bool {
		return calls.Load() == 2 && srv.CheckReady() == nil && b.Depth(q)+b.Unacked(q) == 0
	})
	if m := most.Load(); m != 1 {
		t.Errorf("%d handlers ran at once, want 1", m)
	}
}
