package memory_test

import (
	"strings"
	"testing"

	"github.com/acemq/acemq/transport"
)

// The first delivery of a message hands out a copy of its body made at
// publish time (message.spare). These tests write to every body handed out
// and check that no other delivery, copy or stored message ever sees it:
// they fail if the spare were given to two deliveries.

// scribble overwrites d's body, as a careless handler might.
func scribble(d transport.Delivery) {
	for i := range d.Body {
		d.Body[i] = 'X'
	}
}

// TestSpareFannedOut: a message routed to two queues is two messages; each
// first delivery's body is its own, whatever the body's size (stored with
// the message, beside it, or with no spare at all).
func TestSpareFannedOut(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{
		Exchanges: []transport.Exchange{{Name: "fan", Kind: "fanout", Durable: true}},
		Queues:    []transport.Queue{{Name: "a", Durable: true}, {Name: "b", Durable: true}},
		Bindings:  []transport.Binding{{Queue: "a", Exchange: "fan"}, {Queue: "b", Exchange: "fan"}},
	})
	sa, sb := f.consume("a", 1), f.consume("b", 1)
	for _, n := range []int{0, 7, 64, 65, 200, 256, 1000, 20 << 10} {
		body := strings.Repeat("o", n)
		f.publish(transport.Publishing{Exchange: "fan", Body: []byte(body)})
		da := f.recv(sa, body)
		scribble(da)
		db := f.recv(sb, body)
		scribble(db)
		f.reject(da, true)
		f.reject(db, true)
		f.ack(f.recv(sa, body))
		f.ack(f.recv(sb, body))
	}
}

// TestSpareRequeuedAndDeadLettered: a redelivery and a dead letter carry
// the body as published, whatever the first delivery did to its own.
func TestSpareRequeuedAndDeadLettered(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{
		Exchanges: []transport.Exchange{{Name: "dlx", Kind: "fanout", Durable: true}},
		Queues: []transport.Queue{
			{Name: "work", Durable: true, Args: map[string]any{"x-dead-letter-exchange": "dlx"}},
			{Name: "dead", Durable: true},
		},
		Bindings: []transport.Binding{{Queue: "dead", Exchange: "dlx"}},
	})
	s := f.consume("work", 1)
	f.send("work", "order-2")
	d := f.recv(s, "order-2")
	scribble(d)
	f.reject(d, true)
	d = f.recv(s, "order-2")
	scribble(d)
	f.reject(d, false)
	if got := f.bodies("dead"); len(got) != 1 || got[0] != "order-2" {
		t.Fatalf("dead-lettered bodies %q, want [order-2]", got)
	}
}

// TestSparePeekedThenGot: a peek takes the spare; the delivery after it
// copies, and neither sees the other's writes.
func TestSparePeekedThenGot(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	f.send("q", "order-3")
	peeked := f.b.Peek("q")
	if len(peeked) != 1 {
		t.Fatalf("peeked %d, want 1", len(peeked))
	}
	scribble(peeked[0])
	if got := f.bodies("q"); len(got) != 1 || got[0] != "order-3" {
		t.Fatalf("peeked again %q, want [order-3]", got)
	}
	d, ok, err := f.c.Get(f.ctx, "q")
	if err != nil || !ok || string(d.Body) != "order-3" {
		t.Fatalf("Get: %q %v %v, want order-3", d.Body, ok, err)
	}
	scribble(d)
	if string(peeked[0].Body) != "XXXXXXX" {
		t.Fatalf("the peeked body changed with the delivery's: %q", peeked[0].Body)
	}
}

// TestHeadersKeptByAHandler: a handler that keeps a delivery's headers and
// changes them changes nothing a later delivery of the message sees, and
// the later deliveries change nothing it kept.
func TestHeadersKeptByAHandler(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	s := f.consume("q", 1)
	f.publish(transport.Publishing{RoutingKey: "q", Headers: map[string]any{"k": "v", "b": []byte("raw")}, Body: []byte("m")})
	d := f.recv(s, "m")
	kept := d.Headers
	kept["k"] = "changed"
	kept["b"].([]byte)[0] = 'X'
	for range 3 {
		f.reject(d, true)
		d = f.recv(s, "m")
		if d.Headers["k"] != "v" || string(d.Headers["b"].([]byte)) != "raw" {
			t.Fatalf("a redelivery's headers %v carry a handler's change", d.Headers)
		}
		d.Headers["k"] = "again"
		d.Headers["b"].([]byte)[0] = 'Y'
	}
	if kept["k"] != "changed" || string(kept["b"].([]byte)) != "Xaw" {
		t.Fatalf("kept headers %v changed under the handler", kept)
	}
}
