package acemq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

// TestRabbitPublishDelayed: a scheduled publish on RabbitMQ arrives no
// earlier than due, carrying x-acemq-due; one to a missing queue fails at
// publish.
func TestRabbitPublishDelayed(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	ctx := context.Background()
	q := r.queue()
	declareDelayed(t, r.tr, q)
	t.Cleanup(func() { _, _ = r.admin.QueueDelete(q, false, false, false) })
	p := &acemq.Publisher{Transport: r.tr, Mandatory: true}

	start := time.Now()
	res, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: q, Body: []byte("m"), Delay: 600 * time.Millisecond})
	if err != nil || !res.Routed {
		t.Fatalf("Publish: %+v, %v", res, err)
	}
	d := r.take(q)
	late := time.Since(start) - 625*time.Millisecond
	t.Logf("arrived %v after due", late)
	if late < -5*time.Millisecond || late > 400*time.Millisecond {
		t.Errorf("arrived %v after due, want 0 to 400ms", late)
	}
	if due, ok := transport.Int64(d.Headers[delay.DueHeader]); !ok || due < start.Add(625*time.Millisecond).UnixMilli()-50 {
		t.Errorf("%s = %v", delay.DueHeader, d.Headers[delay.DueHeader])
	}
	if d.Headers["x-acemq-id"] != res.ID {
		t.Errorf("x-acemq-id = %v, want %s", d.Headers["x-acemq-id"], res.ID)
	}

	_, err = p.Publish(ctx, acemq.Outgoing{RoutingKey: q + ".missing", Delay: time.Second})
	if !errors.Is(err, acemq.ErrUnroutable) {
		t.Errorf("to a missing queue: %v, want ErrUnroutable", err)
	}
}
