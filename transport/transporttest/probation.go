package transporttest

import (
	"fmt"
	"testing"

	"github.com/acemq/acemq/transport"
)

// The probation (issue 23): a consumer that dies with a poison must not
// spend the delivery budget of the messages prefetched with it more than
// once.
func init() {
	cases = append(cases,
		testCase{"ProbationPoisonSpendsOwnBudget", testProbationPoison},
		testCase{"ProbationLostReturnsFirst", testProbationLostReturnsFirst},
	)
}

// testProbationLostReturnsFirst: a quorum queue without a delivery limit
// serves what a lost connection held ahead of its ready messages (where a
// reject with requeue goes to the back: QuorumReturnOrder), so a consumer
// on probation takes those first, one at a time, and the first message
// that is not redelivered opens its prefetch (RabbitMQ 3.10.8).
func testProbationLostReturnsFirst(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "quorum", map[string]any{"x-queue-type": "quorum"})
	for _, b := range []string{"a", "b", "c", "d", "e"} {
		e.send(c, q, b)
	}
	a := e.conn()
	subA := e.consume(a, q, 2)
	e.recvBody(subA, "a")
	e.recvBody(subA, "b")
	e.none(subA)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e.depth(c, q, 5)

	sub := e.consume(c, q, 2)
	for _, b := range []string{"a", "b"} {
		d := e.recvBody(sub, b)
		if !d.Redelivered {
			t.Errorf("%s, held by the lost connection, is not marked redelivered", b)
		}
		e.wantInt(d.Headers, "x-delivery-count", 1)
		e.none(sub) // on probation: alone
		e.ack(d)
	}
	cd := e.recvBody(sub, "c")
	if cd.Redelivered {
		t.Error("c is marked redelivered")
	}
	e.recvBody(sub, "d") // the prefetch of 2 is open again
	e.none(sub)
}

// testProbationPoison: a consumer at prefetch 5 holds a poison and three
// healthy messages when its connection dies; the quorum queue counts a
// delivery against each, and serves them first. The consumers that
// follow take them one at a time while they are redelivered: two more
// connections die with the poison alone, which the delivery limit then
// drops, and the healthy ones come back having spent one delivery each,
// not three. The first delivery that is not redelivered opens the
// prefetch again.
func testProbationPoison(t *testing.T, e *env) {
	c := e.conn()
	q, dlq := e.limitedQuorum(c, 2)
	const prefetch = 5
	healthy := []string{"h1", "h2", "h3"}
	e.send(c, q, "first")
	e.send(c, q, "poison")
	for _, h := range healthy {
		e.send(c, q, h)
	}

	// A fresh first delivery ends the probation at once: the poison and
	// the healthy ones are all in flight when the connection dies.
	a := e.conn()
	subA := e.consume(a, q, prefetch)
	first := e.recvBody(subA, "first")
	for _, b := range append([]string{"poison"}, healthy...) {
		d := e.recvBody(subA, b)
		if d.Redelivered {
			t.Errorf("%s redelivered on its first delivery", b)
		}
	}
	e.ack(first)
	if err := a.Close(); err != nil { // the crash: the connection goes
		t.Fatalf("Close: %v", err)
	}
	e.depth(c, q, 1+len(healthy))

	// The restarts: each takes what comes one at a time while it is
	// redelivered (a quorum queue serves returns first, in the order they
	// came back): a healthy one having spent the first crash's delivery
	// only, or the poison, which takes the connection down with it alone,
	// until the delivery limit drops it.
	var poisoned []int64 // the poison's x-delivery-count at each crash
	handled := map[string]int{}
	for restarts := 0; len(handled) < len(healthy) || len(poisoned) < 2; restarts++ {
		if restarts == 6 {
			t.Fatalf("after %d restarts: handled %v, the poison crashed at counts %v", restarts, handled, poisoned)
		}
		conn := e.conn()
		sub := e.consume(conn, q, prefetch)
		for {
			d := e.recv(sub)
			if !d.Redelivered {
				t.Fatalf("%s is not marked redelivered", d.Body)
			}
			n, _ := asInt(d.Headers["x-delivery-count"])
			e.none(sub) // alone: nothing else is in flight with it
			if string(d.Body) == "poison" {
				poisoned = append(poisoned, n)
				if err := conn.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				break
			}
			if n != 1 {
				t.Errorf("%s came back with x-delivery-count %d, want 1: the first crash's only", d.Body, n)
			}
			handled[string(d.Body)]++
			e.ack(d)
		}
	}
	if fmt.Sprint(poisoned) != "[1 2]" {
		t.Errorf("the poison took the connection down at x-delivery-count %v, want [1 2] (the limit is 2)", poisoned)
	}
	for _, h := range healthy {
		if handled[h] != 1 {
			t.Errorf("%s handled %d times, want once", h, handled[h])
		}
	}
	dead := e.recvBody(e.consume(c, dlq, 1), "poison")
	e.wantDeath(dead.Headers, "delivery_limit", q, "", q)
	e.ack(dead)
	e.depth(c, q, 0)

	// A fresh one ends the probation: the prefetch is open again.
	sub := e.consume(c, q, prefetch)
	fresh := make([]string, prefetch)
	for i := range fresh {
		fresh[i] = fmt.Sprintf("fresh%d", i)
		e.send(c, q, fresh[i])
	}
	var held []transport.Delivery
	for _, f := range fresh {
		d := e.recvBody(sub, f)
		if d.Redelivered {
			t.Errorf("%s is marked redelivered", f)
		}
		held = append(held, d)
	}
	e.none(sub)
	for _, d := range held {
		e.ack(d)
	}
	info, err := c.Inspect(e.ctx(), dlq)
	if err != nil || info.Messages != 0 {
		t.Errorf("Inspect %s = %+v, %v: want nothing more dead-lettered than the poison", dlq, info, err)
	}
}
