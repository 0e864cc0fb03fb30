package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
)

// TestQueuesKeyMustNameAServedQueue: a typo in Server.Queues is refused at
// Run, naming the key and the queues served, instead of leaving the real
// queue without its policy.
func TestQueuesKeyMustNameAServedQueue(t *testing.T) {
	t.Parallel()
	_, conn := bare(t)
	srv := &acemq.Server{Transport: conn, Handler: acceptMux("orders"),
		Queues: map[string]acemq.QueueConfig{"ordres": {Retry: retry.Fixed(3, time.Second)}}}
	err := srv.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"ordres"`) || !strings.Contains(err.Error(), "serves orders") {
		t.Fatalf("Run = %v, want a refusal naming ordres and the served queue", err)
	}
	if info, ierr := conn.Inspect(context.Background(), "orders"); ierr == nil {
		t.Errorf("Run declared before refusing its settings: %+v", info)
	}
}

// TestRunAfterShutdownIsServerClosed: as http.Server.Serve, a Run after a
// Shutdown of a server that ran returns ErrServerClosed.
func TestRunAfterShutdownIsServerClosed(t *testing.T) {
	t.Parallel()
	f := start(t, &acemq.Server{}, map[string]acemq.Handler{"q": always(ack.Accept())})
	if err, runErr := f.stop(time.Second); err != nil || runErr != nil {
		t.Fatalf("Shutdown = %v, Run = %v", err, runErr)
	}
	if err := f.srv.Run(context.Background()); !errors.Is(err, acemq.ErrServerClosed) {
		t.Errorf("Run after Shutdown = %v, want ErrServerClosed", err)
	}
	if err := f.srv.Close(); err != nil {
		t.Errorf("Close after Shutdown = %v", err)
	}
}

// TestNoAnswerIsDeadLettered: a middleware that forgets to return its next
// handler's answer returns the zero Ack; the message is dead-lettered with
// a reason saying so, never acknowledged as handled.
func TestNoAnswerIsDeadLettered(t *testing.T) {
	t.Parallel()
	forgetful := acemq.Middleware(func(next acemq.Handler) acemq.Handler {
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			next.ServeMessage(ctx, m)
			var a ack.Ack
			return a
		})
	})
	h := always(ack.Accept())
	f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Second)}, map[string]acemq.Handler{"q": forgetful(h)})
	f.publish("q", "{}", nil)
	d := f.only("q.dlq")
	if env := acemq.EnvelopeOf(d); !strings.Contains(env.Error, "returned no answer") || env.Attempt != 1 {
		t.Errorf("dead letter %+v", env)
	}
	f.counterReaches(acemq.MetricDeadLettered, map[string]string{"outcome": "no_answer"}, 1)
	// One word for it on both metrics, counted once the original is acked.
	f.eventually("handled{no_answer}", func() bool {
		return f.counter(acemq.MetricHandled, map[string]string{"outcome": "no_answer"}) == 1
	})
}
