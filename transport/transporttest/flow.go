package transporttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// testPrefetch: with prefetch 2 and five messages, two are delivered and
// the third only once one is settled.
func testPrefetch(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	for i := range 5 {
		e.send(c, q, fmt.Sprint(i))
	}
	sub := e.consume(c, q, 2)
	d0 := e.recvBody(sub, "0")
	d1 := e.recvBody(sub, "1")
	e.none(sub)
	e.depth(c, q, 3)

	e.ack(d0)
	d2 := e.recvBody(sub, "2")
	e.none(sub)
	e.ack(d1)
	e.ack(d2)
	e.ack(e.recvBody(sub, "3"))
	e.ack(e.recvBody(sub, "4"))
	e.none(sub)
}

// testSubscriptionCloseReturns: Close gives unsettled deliveries back,
// redelivered and in their order.
func testSubscriptionCloseReturns(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	for _, b := range []string{"a", "b", "c"} {
		e.send(c, q, b)
	}
	sub := e.consume(c, q, 3)
	e.ack(e.recvBody(sub, "a"))
	e.recvBody(sub, "b")
	e.recvBody(sub, "c")
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e.send(c, q, "d")
	e.depth(c, q, 3)

	sub2 := e.consume(c, q, 5)
	for _, b := range []string{"b", "c"} {
		d := e.recvBody(sub2, b)
		if !d.Redelivered {
			t.Errorf("%s given back by Close: not marked redelivered", b)
		}
		e.ack(d)
	}
	d := e.recvBody(sub2, "d")
	if d.Redelivered {
		t.Error("d was never delivered, yet is marked redelivered")
	}
	e.ack(d)
}

// testCancel: Cancel closes Deliveries once the broker stopped; what was
// received stays settleable; new messages stay in the queue.
func testCancel(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	e.send(c, q, "held")
	sub := e.consume(c, q, 1)
	held := e.recvBody(sub, "held")

	if err := sub.Cancel(e.ctx()); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	select {
	case d, ok := <-sub.Deliveries():
		if ok {
			t.Fatalf("delivery %q after Cancel with prefetch 1 and one unsettled", d.Body)
		}
	case <-time.After(wait):
		t.Fatalf("Deliveries not closed %v after Cancel", wait)
	}
	e.ack(held)

	e.send(c, q, "later")
	e.depth(c, q, 1)
	info, err := c.Inspect(e.ctx(), q)
	if err != nil || info.Consumers != 0 {
		t.Errorf("Inspect after Cancel: %+v, %v; want no consumers", info, err)
	}
}

// testTransportCloseReturns: closing a transport gives back what its
// consumers held; another connection then gets it, redelivered.
func testTransportCloseReturns(t *testing.T, e *env) {
	c1 := e.conn()
	q := e.queue(c1, "q", nil)
	e.send(c1, q, "m")
	sub := e.consume(c1, q, 1)
	held := e.recvBody(sub, "m")

	if err := c1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e.wantErr("Ack after the transport closed", held.Ack(), transport.ErrStaleDelivery)

	c2 := e.conn()
	e.depth(c2, q, 1)
	d := e.recvBody(e.consume(c2, q, 1), "m")
	if !d.Redelivered {
		t.Error("message given back by Close not marked redelivered")
	}
	e.ack(d)
}

// testCompetingConsumers: two connections on one queue share it.
func testCompetingConsumers(t *testing.T, e *env) {
	c1, c2 := e.conn(), e.conn()
	q := e.queue(c1, "q", nil)
	s1 := e.consume(c1, q, 1)
	s2 := e.consume(c2, q, 1)
	info, err := c1.Inspect(e.ctx(), q)
	if err != nil || info.Consumers != 2 {
		t.Fatalf("Inspect: %+v, %v; want 2 consumers", info, err)
	}
	e.send(c1, q, "x")
	e.send(c1, q, "y")

	// Each holds one unsettled message under prefetch 1, so each got one.
	d1, d2 := e.recv(s1), e.recv(s2)
	if got := string(d1.Body) + string(d2.Body); got != "xy" && got != "yx" {
		t.Fatalf("consumers got %q and %q, want x and y between them", d1.Body, d2.Body)
	}
	e.ack(d1)
	e.ack(d2)

	const n = 20
	seen := map[string]int{}
	for i := range n {
		e.send(c2, q, fmt.Sprint(i))
	}
	got := map[transport.Subscription]int{}
	for len(seen) < n {
		var d transport.Delivery
		var from transport.Subscription
		ok := true
		select {
		case d, ok = <-s1.Deliveries():
			from = s1
		case d, ok = <-s2.Deliveries():
			from = s2
		case <-time.After(wait):
			t.Fatalf("received %d of %d messages", len(seen), n)
		}
		if !ok {
			t.Fatal("Deliveries closed under a running consumer")
		}
		seen[string(d.Body)]++
		got[from]++
		e.ack(d)
	}
	if got[s1] == 0 || got[s2] == 0 {
		t.Errorf("one consumer got everything: %d and %d", got[s1], got[s2])
	}
	for b, k := range seen {
		if k != 1 {
			t.Errorf("message %s delivered %d times", b, k)
		}
	}
}
