package memory_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

// delayed declares the delay infrastructure and queue bound to its deliver
// exchange.
func (f *fixture) delayed(queue string) {
	f.t.Helper()
	bd, err := delay.Bind(queue)
	if err != nil {
		f.t.Fatal(err)
	}
	f.declare(delay.Topology())
	f.declare(transport.Topology{Queues: []transport.Queue{{Name: queue, Durable: true}}, Bindings: []transport.Binding{bd}})
}

// sendAfter publishes body to queue through the levels, and returns when
// it is due.
func (f *fixture) sendAfter(queue, body string, d time.Duration) time.Duration {
	f.t.Helper()
	r, err := delay.RouteTo(queue, d)
	if err != nil {
		f.t.Fatal(err)
	}
	if !f.publish(transport.Publishing{Exchange: r.Exchange, RoutingKey: r.Key, Mandatory: true, Body: []byte(body)}).Routed {
		f.t.Fatalf("%s after %v: not routed", body, d)
	}
	return r.Wait
}

func TestDelayWalkDeliversWhenDue(t *testing.T) {
	u := delay.Unit
	delays := []time.Duration{0, -time.Second, time.Millisecond, u, time.Second, 2500 * time.Millisecond,
		6 * time.Hour, delay.Max}
	for _, k := range []int{1, 2, 7, 13, 20, 27} {
		n := time.Duration(1) << k
		delays = append(delays, (n-1)*u, n*u, (n+1)*u)
	}
	for _, d := range delays {
		t.Run(d.String(), func(t *testing.T) {
			f := setup(t)
			f.delayed("orders")
			due := f.sendAfter("orders", "m", d)
			if d > 0 && (due < d || due-d >= u) {
				t.Fatalf("due after %v for a delay of %v", due, d)
			}
			start := time.Now()
			if due > 0 {
				f.b.Clock().Advance(due - time.Nanosecond)
				if n := f.b.Depth("orders"); n != 0 {
					t.Fatalf("%d messages a nanosecond before due", n)
				}
				f.b.Clock().Advance(time.Nanosecond)
			}
			if n := f.b.Depth("orders"); n != 1 {
				t.Fatalf("%d messages when due, want 1", n)
			}
			for k := range delay.Levels {
				if n := f.b.Depth(delay.Level(k)); n != 0 {
					t.Errorf("%d messages left on level %d", n, k)
				}
			}
			if time.Since(start) > 30*time.Second { // virtual hours; a busy machine's real seconds
				t.Errorf("the walk took %v of real time", time.Since(start))
			}
			m := f.b.Peek("orders")[0]
			if want, _ := delay.RouteTo("orders", d); m.RoutingKey != want.Key {
				t.Errorf("arrived with key %q, want %q", m.RoutingKey, want.Key)
			}
		})
	}
}

// A delay longer than another's never waits behind it: each waits on its
// own levels.
func TestDelayNoHeadOfLineBlocking(t *testing.T) {
	f := setup(t)
	f.delayed("orders")
	f.sendAfter("orders", "long", time.Hour)
	f.sendAfter("orders", "short", time.Second)
	f.b.Clock().Advance(time.Second)
	if got := f.b.Peek("orders"); len(got) != 1 || string(got[0].Body) != "short" {
		t.Fatalf("after 1s: %v, want short alone", bodies(got))
	}
	f.b.Clock().Advance(time.Hour - time.Second)
	if n := f.b.Depth("orders"); n != 2 {
		t.Fatalf("after 1h: %d, want 2", n)
	}
}

func bodies(ds []transport.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.Body))
	}
	return out
}

func TestDelayDestinationGoneWaitsUndeliverable(t *testing.T) {
	f := setup(t)
	f.delayed("orders")
	f.sendAfter("orders", "m", time.Minute)
	f.b.DeleteQueue("orders")
	f.b.Clock().Advance(time.Minute)
	if n := f.b.Depth(delay.Undeliverable); n != 1 {
		t.Fatalf("%d undeliverable, want 1", n)
	}
	// Still gone: it comes back to wait again.
	if r, err := delay.Redeliver(f.ctx, f.c); r.Arrived != 0 || r.Waiting["orders"] != 1 || err != nil {
		t.Fatalf("Redeliver = %+v, %v", r, err)
	}
	if n := f.b.Depth(delay.Undeliverable); n != 1 {
		t.Fatalf("%d undeliverable after a redelivery to nowhere, want 1", n)
	}
	f.delayed("orders")
	if r, err := delay.Redeliver(f.ctx, f.c); r.Arrived != 1 || len(r.Waiting) != 0 || err != nil {
		t.Fatalf("Redeliver = %+v, %v", r, err)
	}
	if got := f.b.Peek("orders"); len(got) != 1 || string(got[0].Body) != "m" {
		t.Fatalf("orders = %v, want m", bodies(got))
	}
	if n := f.b.Depth(delay.Undeliverable); n != 0 {
		t.Errorf("%d left undeliverable", n)
	}
}

// The deliver binding takes exactly 28 words and then the queue's: a
// queue whose name ends with another's words gets none of its messages.
func TestDelayDeliverBindingIsExact(t *testing.T) {
	f := setup(t)
	f.delayed("created")
	f.delayed("orders.created")
	f.sendAfter("orders.created", "m", 0)
	if a, b := f.b.Depth("created"), f.b.Depth("orders.created"); a != 0 || b != 1 {
		t.Fatalf("created %d, orders.created %d; want 0, 1", a, b)
	}
}

func TestTopicMatchesLikeRabbitMQ(t *testing.T) {
	f := setup(t)
	tests := []struct {
		pattern, key string
		match        bool
	}{
		{"#", "", true}, {"#", "a.b", true}, {"*", "", false}, {"", "", true}, {"*", "a.b", false}, // "" is no words (RabbitMQ 3.10.8)
		{"a.#", "a", true}, {"a.#", "a.b.c", true}, {"a.*", "a", false}, {"a.*.c", "a.b.c", true},
		{"#.c", "a.b.c", true}, {"#.c", "c", true}, {"*.*", "a..", false}, {"*.*.*", "a..", true},
		{"a.#.c", "a.c", true}, {"a.#.c", "a.b.b.c", true}, {"a.b", "a.b.c", false},
	}
	for i, tt := range tests {
		q := fmt.Sprintf("q%d", i)
		x := fmt.Sprintf("x%d", i)
		f.declare(transport.Topology{
			Exchanges: []transport.Exchange{{Name: x, Kind: "topic", Durable: true}},
			Queues:    []transport.Queue{{Name: q, Durable: true}},
			Bindings:  []transport.Binding{{Queue: q, Exchange: x, Key: tt.pattern}},
		})
		if got := f.publish(transport.Publishing{Exchange: x, RoutingKey: tt.key, Mandatory: true}).Routed; got != tt.match {
			t.Errorf("pattern %q key %q: routed %v, want %v", tt.pattern, tt.key, got, tt.match)
		}
	}
}

func TestExchangeBindingsAndAlternate(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{
		Exchanges: []transport.Exchange{
			{Name: "a", Kind: "topic", Durable: true, Args: map[string]any{"alternate-exchange": "ae"}},
			{Name: "b", Kind: "direct", Durable: true},
			{Name: "ae", Kind: "fanout", Durable: true},
		},
		Queues:           []transport.Queue{{Name: "qb", Durable: true}, {Name: "qae", Durable: true}},
		Bindings:         []transport.Binding{{Queue: "qb", Exchange: "b", Key: "k"}, {Queue: "qae", Exchange: "ae"}},
		ExchangeBindings: []transport.ExchangeBinding{{Destination: "b", Source: "a", Key: "#"}, {Destination: "a", Source: "b", Key: "k"}},
	})
	f.publish(transport.Publishing{Exchange: "a", RoutingKey: "k", Mandatory: true})
	if a, b := f.b.Depth("qb"), f.b.Depth("qae"); a != 1 || b != 0 {
		t.Fatalf("key k: qb %d, qae %d; want 1, 0 (a cycle of exchanges routes once)", a, b)
	}
	// a's binding to b matched, so a's alternate is not used even though b
	// routed nowhere (RabbitMQ: the alternate is for an exchange that
	// matched nothing).
	if f.publish(transport.Publishing{Exchange: "a", RoutingKey: "other", Mandatory: true}).Routed {
		t.Fatal("key other routed")
	}
	f.declare(transport.Topology{Exchanges: []transport.Exchange{{Name: "c", Kind: "direct", Durable: true, Args: map[string]any{"alternate-exchange": "ae"}}}})
	if !f.publish(transport.Publishing{Exchange: "c", RoutingKey: "x", Mandatory: true}).Routed || f.b.Depth("qae") != 1 {
		t.Fatal("the alternate exchange did not take a message c matched nowhere")
	}
	err := f.c.Declare(f.ctx, transport.Topology{Exchanges: []transport.Exchange{{Name: "c", Kind: "direct", Durable: true}}})
	if err == nil {
		t.Fatal("a redeclare without alternate-exchange was taken")
	}
	err = f.c.Declare(f.ctx, transport.Topology{ExchangeBindings: []transport.ExchangeBinding{{Destination: "missing", Source: "a"}}})
	if err == nil {
		t.Fatal("a binding to a missing exchange was taken")
	}
}

// A quorum queue under at-least-once dead-lettering keeps a dead letter
// its target refuses (full, reject-publish) and offers it again every
// three minutes, as RabbitMQ's dead-letter worker does; at most once, it
// is lost.
func TestAtLeastOnceDeadLetteringHolds(t *testing.T) {
	for _, strategy := range []string{"at-least-once", "at-most-once"} {
		t.Run(strategy, func(t *testing.T) {
			f := setup(t)
			f.declare(transport.Topology{
				Exchanges: []transport.Exchange{{Name: "dlx", Kind: "fanout", Durable: true}},
				Queues: []transport.Queue{
					{Name: "wait", Durable: true, Args: map[string]any{
						"x-queue-type": "quorum", "x-message-ttl": int64(1000), "x-dead-letter-exchange": "dlx",
						"x-dead-letter-strategy": strategy, "x-overflow": "reject-publish",
					}},
					{Name: "full", Durable: true, Args: map[string]any{"x-max-length": int64(1), "x-overflow": "reject-publish"}},
				},
				Bindings: []transport.Binding{{Queue: "full", Exchange: "dlx"}},
			})
			f.send("full", "first")
			f.send("wait", "m")
			f.b.Clock().Advance(time.Second)
			if n := f.b.Depth("full"); n != 1 {
				t.Fatalf("full holds %d, want 1", n)
			}
			d, ok, err := f.c.Get(f.ctx, "full")
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			_ = d.Ack()
			f.b.Clock().Advance(3*time.Minute - time.Nanosecond)
			if n := f.b.Depth("full"); n != 0 {
				t.Fatalf("retried early: full holds %d", n)
			}
			f.b.Clock().Advance(time.Nanosecond)
			want := 0
			if strategy == "at-least-once" {
				want = 1
			}
			if n := f.b.Depth("full"); n != want {
				t.Fatalf("after the settle timeout full holds %d, want %d", n, want)
			}
		})
	}
}
