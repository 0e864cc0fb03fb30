package acemq_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

// inspectCounter counts the passive declares a Publisher makes.
type inspectCounter struct {
	transport.Transport
	n atomic.Int64
}

func (c *inspectCounter) Inspect(ctx context.Context, q string) (transport.QueueInfo, error) {
	c.n.Add(1)
	return c.Transport.Inspect(ctx, q)
}

// TestPublishDelayedChecksTheQueueOnce: a stream of delayed publishes to
// one queue checks it once, not once each; a queue deleted within the
// window takes its delayed message all the same, which at its due time
// waits in acemq.delay.v1.undeliverable: late, never lost; a queue never
// seen is still refused at once.
func TestPublishDelayedChecksTheQueueOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, p := delayed(t, "orders")
	ic := &inspectCounter{Transport: p.Transport}
	p.Transport, p.Clock = ic, b.Clock()
	for range 5 {
		if _, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "orders", Delay: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	if n := ic.n.Load(); n != 1 {
		t.Fatalf("%d passive declares for five delayed publishes to one queue, want 1", n)
	}
	b.DeleteQueue("orders")
	if _, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "orders", Delay: time.Second}); err != nil {
		t.Fatalf("a delayed publish to a queue deleted within the window: %v, want it taken", err)
	}
	b.Clock().Advance(2 * time.Second)
	if n := b.Depth(delay.Undeliverable); n != 6 {
		t.Fatalf("%d of the 6 delayed messages wait in %s, want all: their queue is gone", n, delay.Undeliverable)
	}
	if _, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "never-there", Delay: time.Second}); err == nil {
		t.Fatal("a delayed publish to a queue never seen was taken")
	}
}
