package soak_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport/memory"
)

// TestSoakRegressionDeletedQueueDeclaredAgainAtOnce is the soak's finding
// (issue 29, seed 1796215466699503418): a queue deleted under a server is
// declared and consumed again only once every worker of the cancelled
// subscription has ended (engine supervise: alive.Wait before
// resubscribe). A long handler (up to HandlerTimeout, 25 minutes by
// default) keeps the queue missing for as long as it runs: publishes to it
// are unroutable (dropped by the broker when not mandatory), and copies on
// its rungs expire into nothing. Here one handler runs until the test
// releases it: the queue must be back within seconds all the same.
func TestSoakRegressionDeletedQueueDeclaredAgainAtOnce(t *testing.T) {
	const q = "soak.regress.deleted"
	b := memory.New()
	defer b.Close()
	conn := b.Connect()
	defer conn.Close()
	var calls atomic.Int64
	release := make(chan struct{})
	mux := acemq.NewMux()
	mux.HandleFunc(q, func(ctx context.Context, m *acemq.Message) ack.Ack {
		calls.Add(1)
		<-release // a long job: a report, a big import
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: conn, Handler: mux, Logger: zap.NewNop()}
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
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the handler did not start")
		}
		time.Sleep(time.Millisecond)
	}
	b.DeleteQueue(q)
	deadline = time.Now().Add(30 * time.Second)
	for {
		if _, ok := b.Queue(q); ok {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("%s is still missing 30 s after its deletion, while a handler of its runs: the server declares it again only once that handler returns", q)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	// A message published now reaches the queue declared again.
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{ID: "r-2", RoutingKey: q, Body: []byte("{}")}); err != nil {
		t.Fatalf("publish after the queue was declared again: %v", err)
	}
}
