package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// TestRabbitRetryAfterAndSnooze: on RabbitMQ, a handler's RetryAfter and
// Snooze over the threshold wait on the delay queues the server declared
// (quorum, at least once) and come back no earlier than due: the retry
// with its attempt spent, the snooze with its attempt kept and counted.
func TestRabbitRetryAfterAndSnooze(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	t.Cleanup(func() { _, _ = r.admin.QueueDelete(q, false, false, false) })
	h := &answers{acks: []ack.Ack{ack.RetryAfter(1200*time.Millisecond, errors.New("429")), ack.Snooze(800 * time.Millisecond), ack.Accept()}}
	r.serve(r.tr, q, &acemq.Server{Retry: retry.Fixed(3, 10*time.Millisecond).WithBrokerWaitThreshold(500 * time.Millisecond)}, h)

	// A redeclaration with other arguments is refused (406), so this
	// passing says the server declared quorum queues dead-lettering at
	// least once, as 3.10.8 supports.
	if err := r.tr.Declare(context.Background(), delay.Topology()); err != nil {
		t.Fatalf("the delay queues the server declared differ from delay.Topology(): %v", err)
	}
	start := time.Now()
	r.publish(q, "m")
	r.eventually("three deliveries", func() bool { return len(h.deliveries()) == 3 })
	got := h.deliveries()
	if got[1].Attempt != 2 || got[2].Attempt != 2 || got[2].Snoozes != 1 {
		t.Errorf("envelopes %+v, want attempt 2 after the retry, kept by the snooze, one snooze", got)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("retry 1.2 s then snooze 0.8 s came back after %v, earlier than due", took)
	}
	if n := r.counter(acemq.MetricRetries, map[string]string{"where": "delays"}); n != 1 {
		t.Errorf("retries{where=delays} = %d, want 1", n)
	}
	if n := r.counter(acemq.MetricSnoozed, map[string]string{"where": "delays"}); n != 1 {
		t.Errorf("snoozed{where=delays} = %d, want 1", n)
	}
}

// TestRabbitNoDeclareNamesWhatIsMissing: with declaration off, a server
// whose .dlq is missing does not start, and the error names the queue and
// the command; the broker's own 404 is kept underneath.
func TestRabbitNoDeclareNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	if err := r.tr.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = r.admin.QueueDelete(q, false, false, false) })
	mux := acemq.NewMux()
	mux.Handle(q, acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() }))
	err := (&acemq.Server{Transport: r.tr, Handler: mux, NoDeclare: true}).Run(context.Background())
	if !errors.Is(err, acemq.ErrMissingTopology) || !errors.Is(err, transport.ErrNotFound) ||
		!strings.Contains(err.Error(), q+".dlq does not exist") || !strings.Contains(err.Error(), "acemq topology --apply --queue "+q) {
		t.Errorf("Run = %v", err)
	}
}
