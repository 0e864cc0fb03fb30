package acemq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

func delayed(t *testing.T, queue string) (*memory.Broker, *acemq.Publisher) {
	t.Helper()
	b := memory.New()
	c := b.Connect()
	t.Cleanup(func() { _ = b.Close() })
	declareDelayed(t, c, queue)
	return b, &acemq.Publisher{Transport: c, Mandatory: true}
}

// declareDelayed declares the delay infrastructure and queue, bound to it.
func declareDelayed(t *testing.T, c transport.Transport, queue string) {
	t.Helper()
	bd, err := delay.Bind(queue)
	if err != nil {
		t.Fatal(err)
	}
	top := delay.Topology()
	top.Queues = append(top.Queues, transport.Queue{Name: queue, Durable: true})
	top.Bindings = append(top.Bindings, bd)
	if err := c.Declare(context.Background(), top); err != nil {
		t.Fatal(err)
	}
}

// TestPublishDelayed: after a delay, at a time, at a time past; each
// arrives when due on the virtual clock, with the wire contract's headers
// and its due time.
func TestPublishDelayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, p := delayed(t, "orders")
	start := b.Clock().Now()
	tests := []struct {
		name string
		o    acemq.Outgoing
		due  time.Duration
	}{
		{"after 6h", acemq.Outgoing{Delay: 6 * time.Hour}, 6 * time.Hour},
		{"after 1ms", acemq.Outgoing{Delay: time.Millisecond}, delay.Unit},
		{"at", acemq.Outgoing{At: start.Add(90 * time.Minute)}, 90 * time.Minute},
		{"at, past", acemq.Outgoing{At: start.Add(-time.Hour)}, 0},
	}
	for _, tt := range tests {
		o := tt.o
		o.RoutingKey, o.ID, o.Body = "orders", tt.name, []byte(tt.name)
		res, err := p.Publish(ctx, o)
		if err != nil || !res.Routed {
			t.Fatalf("%s: %+v, %v", tt.name, res, err)
		}
	}
	real := time.Now()
	var got []string
	for _, due := range []time.Duration{0, delay.Unit, 90 * time.Minute, 6 * time.Hour} {
		now := b.Clock().Now().Sub(start)
		if due > now {
			b.Clock().Advance(due - now - time.Nanosecond)
			if b.Depth("orders") != 0 {
				t.Fatalf("%v: a message before it is due", due)
			}
			b.Clock().Advance(time.Nanosecond)
		}
		ds := b.Peek("orders")
		if len(ds) != 1 {
			t.Fatalf("at %v: %d messages, want 1", due, len(ds))
		}
		d := ds[0]
		got = append(got, string(d.Body))
		if d.Headers["x-acemq-id"] != string(d.Body) || d.Headers["x-acemq-routing-key"] != "orders" {
			t.Errorf("%s: headers %v", d.Body, d.Headers)
		}
		if due > 0 && d.Headers[delay.DueHeader] != start.Add(due).UnixMilli() {
			t.Errorf("%s: %s = %v, want %d", d.Body, delay.DueHeader, d.Headers[delay.DueHeader], start.Add(due).UnixMilli())
		}
		dd, ok, err := p.Transport.Get(ctx, "orders")
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		_ = dd.Ack()
	}
	if want := []string{"at, past", "after 1ms", "at", "after 6h"}; !equal(got, want) {
		t.Errorf("arrived %v, want %v", got, want)
	}
	if d := time.Since(real); d > time.Second {
		t.Errorf("six virtual hours took %v", d)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPublishDelayedRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, p := delayed(t, "orders")
	_, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "missing", Delay: time.Second})
	var pe *acemq.PublishError
	if !errors.Is(err, acemq.ErrUnroutable) || !errors.As(err, &pe) || !pe.Unroutable {
		t.Errorf("to a missing queue: %v, want a PublishError wrapping ErrUnroutable", err)
	}
	if _, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "orders", Delay: delay.Max + 1}); !errors.Is(err, delay.ErrTooLong) {
		t.Errorf("over the maximum: %v, want ErrTooLong", err)
	}
	if _, err := p.Publish(ctx, acemq.Outgoing{Exchange: "x", RoutingKey: "orders", Delay: time.Second}); err == nil {
		t.Error("a delayed publish to an exchange was taken")
	}
	if _, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "orders", Delay: time.Second, At: time.Now()}); err == nil {
		t.Error("Delay and At both set was taken")
	}
	for k := range delay.Levels {
		if n := b.Depth(delay.Level(k)); n != 0 {
			t.Errorf("a refused publish left %d on level %d", n, k)
		}
	}
}
