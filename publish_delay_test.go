package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
		if r, _ := delay.RouteTo("orders", due); d.RoutingKey != r.Key {
			t.Errorf("%s: routing key %q, want %q", d.Body, d.RoutingKey, r.Key)
		}
		// Due now: published to the deliver exchange, no level waited on.
		if due == 0 && (d.Exchange != delay.Deliver || d.Headers["x-death"] != nil) {
			t.Errorf("%s: from exchange %q with x-death %v, want %s and none", d.Body, d.Exchange, d.Headers["x-death"], delay.Deliver)
		}
		if d.Headers["x-acemq-id"] != string(d.Body) || d.Headers["x-acemq-routing-key"] != "orders" {
			t.Errorf("%s: headers %v", d.Body, d.Headers)
		}
		if d.Headers[delay.DueHeader] != start.Add(due).UnixMilli() {
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
	if d := time.Since(real); d > 30*time.Second { // a busy machine is slow; a real wait would be six hours
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

// TestPublishDelayedRefused: what cannot be delivered is refused before
// anything reaches the broker: a queue that does not exist (ErrUnroutable,
// as a direct publish to it would be), a delay over the maximum, a
// delayed publish to an exchange, Delay and At both. Nothing waits on a
// level, nothing is due later.
func TestPublishDelayedRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, p := delayed(t, "orders")
	rec := &publishCounter{Transport: p.Transport}
	p.Transport, p.Clock = rec, b.Clock()
	_, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "missing", Delay: time.Second})
	var pe *acemq.PublishError
	if !errors.Is(err, acemq.ErrUnroutable) || !errors.As(err, &pe) || !pe.Unroutable {
		t.Errorf("to a missing queue: %v, want a PublishError wrapping ErrUnroutable", err)
	}
	if _, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "orders", Delay: delay.Max + 1}); !errors.Is(err, delay.ErrTooLong) {
		t.Errorf("over the maximum: %v, want ErrTooLong", err)
	}
	if _, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "orders", At: b.Clock().Now().Add(delay.Max + 1)}); !errors.Is(err, delay.ErrTooLong) {
		t.Errorf("at a time over the maximum away: %v, want ErrTooLong", err)
	}
	if _, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "orders.*", Delay: time.Second}); !errors.Is(err, delay.ErrDestination) {
		t.Errorf("to a queue with a wildcard word: %v, want ErrDestination", err)
	}
	if _, err := p.Publish(ctx, acemq.Outgoing{Exchange: "x", RoutingKey: "orders", Delay: time.Second}); err == nil {
		t.Error("a delayed publish to an exchange was taken")
	}
	if _, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "orders", Delay: time.Second, At: time.Now()}); err == nil {
		t.Error("Delay and At both set was taken")
	}
	if n := rec.count(); n != 0 {
		t.Errorf("%d publishes reached the broker, want none", n)
	}
	b.Clock().Advance(delay.Max)
	for _, q := range append(levelQueues(), delay.Undeliverable, "orders") {
		if n := b.Depth(q); n != 0 {
			t.Errorf("a refused publish left %d in %s", n, q)
		}
	}
}

func levelQueues() []string {
	var qs []string
	for k := range delay.Levels {
		qs = append(qs, delay.Level(k))
	}
	return qs
}

// publishCounter is a transport that counts the publishes that reach it.
type publishCounter struct {
	transport.Transport
	mu  sync.Mutex
	got []transport.Publishing
}

func (r *publishCounter) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	r.mu.Lock()
	r.got = append(r.got, p)
	r.mu.Unlock()
	return r.Transport.Publish(ctx, p)
}

func (r *publishCounter) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// TestPublishDelayedLevels: a Publisher's delays at the boundaries (of
// the unit, of the levels, of powers of two seconds, the maximum), by
// Delay and by At, each published once to the level of its highest bit,
// stamped with its due time, and arriving exactly then on the virtual
// clock: not a nanosecond before, not a unit late.
func TestPublishDelayedLevels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := delay.Unit
	delays := []time.Duration{u, u + time.Millisecond, time.Second, delay.Max - 1, delay.Max}
	for _, k := range []int{1, 4, 10, 16, 24} {
		s := time.Duration(1) << k * time.Second
		delays = append(delays, s-time.Second, s, s+time.Second)
	}
	for _, k := range []int{3, 9, 27} {
		n := time.Duration(1) << k * u
		delays = append(delays, n-u, n, n+u)
	}
	for _, d := range delays {
		for _, how := range []string{"after", "at"} {
			t.Run(fmt.Sprintf("%s %v", how, d), func(t *testing.T) {
				t.Parallel()
				b, p := delayed(t, "orders")
				rec := &publishCounter{Transport: p.Transport}
				p.Transport, p.Clock = rec, b.Clock()
				start := b.Clock().Now()
				o := acemq.Outgoing{RoutingKey: "orders", Body: []byte("m"), Delay: d}
				if how == "at" {
					o.Delay, o.At = 0, start.Add(d)
				}
				if _, err := p.Publish(ctx, o); err != nil {
					t.Fatal(err)
				}
				r, err := delay.RouteTo("orders", d)
				if err != nil {
					t.Fatal(err)
				}
				if n := rec.count(); n != 1 || rec.got[0].Exchange != r.Exchange || rec.got[0].RoutingKey != r.Key {
					t.Fatalf("published %d, first %+v; want once to %s %q", n, rec.got, r.Exchange, r.Key)
				}
				if b.Depth(r.Exchange) != 1 {
					t.Fatalf("not waiting on %s", r.Exchange)
				}
				b.Clock().Advance(r.Wait - time.Nanosecond)
				if n := b.Depth("orders"); n != 0 {
					t.Fatalf("arrived a nanosecond before due (%v)", r.Wait)
				}
				b.Clock().Advance(time.Nanosecond)
				ds := b.Peek("orders")
				if len(ds) != 1 {
					t.Fatalf("%d messages when due, want 1", len(ds))
				}
				if got, want := ds[0].Headers[delay.DueHeader], start.Add(r.Wait).UnixMilli(); got != want {
					t.Errorf("%s = %v, want %d", delay.DueHeader, got, want)
				}
				for _, q := range append(levelQueues(), delay.Undeliverable) {
					if n := b.Depth(q); n != 0 {
						t.Errorf("%d left in %s", n, q)
					}
				}
			})
		}
	}
}

// TestPublishDelayedDestinationDeleted: a queue deleted while its message
// waits: when due, the message goes to the undeliverable queue, not lost;
// delay.Redeliver counts it waiting while the queue is gone and arrived
// once it is back, once.
func TestPublishDelayedDestinationDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, p := delayed(t, "orders")
	start := b.Clock().Now()
	res, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "orders", Body: []byte("m"), Delay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !b.DeleteQueue("orders") {
		t.Fatal("orders was not there to delete")
	}
	b.Clock().Advance(time.Second - time.Nanosecond)
	if n := b.Depth(delay.Undeliverable); n != 0 {
		t.Fatalf("%d undeliverable before due", n)
	}
	b.Clock().Advance(time.Nanosecond)
	if n := b.Depth(delay.Undeliverable); n != 1 {
		t.Fatalf("%d undeliverable when due, want 1", n)
	}
	for _, q := range levelQueues() {
		if n := b.Depth(q); n != 0 {
			t.Errorf("%d left in %s", n, q)
		}
	}
	r, err := delay.Redeliver(ctx, p.Transport)
	if err != nil || r.Arrived != 0 || r.Waiting["orders"] != 1 || len(r.Waiting) != 1 {
		t.Fatalf("Redeliver with the queue gone = %+v, %v; want 1 waiting for orders", r, err)
	}
	if n := b.Depth(delay.Undeliverable); n != 1 {
		t.Fatalf("%d undeliverable after a pass to nowhere, want 1", n)
	}
	declareDelayed(t, p.Transport, "orders")
	r, err = delay.Redeliver(ctx, p.Transport)
	if err != nil || r.Arrived != 1 || len(r.Waiting) != 0 {
		t.Fatalf("Redeliver with the queue back = %+v, %v; want 1 arrived", r, err)
	}
	ds := b.Peek("orders")
	if len(ds) != 1 {
		t.Fatalf("%d in orders, want 1", len(ds))
	}
	d := ds[0]
	if string(d.Body) != "m" || d.Headers["x-acemq-id"] != res.ID || d.Headers[delay.DueHeader] != start.Add(time.Second).UnixMilli() ||
		d.RoutingKey != "orders" {
		t.Errorf("arrived %q by key %q with headers %v", d.Body, d.RoutingKey, d.Headers)
	}
	if r, err := delay.Redeliver(ctx, p.Transport); err != nil || r.Arrived != 0 || len(r.Waiting) != 0 {
		t.Errorf("a second pass = %+v, %v; want nothing moved", r, err)
	}
	if n := b.Depth(delay.Undeliverable); n != 0 {
		t.Errorf("%d still undeliverable", n)
	}
}
