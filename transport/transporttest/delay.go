package transporttest

import (
	"slices"
	"testing"
	"time"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

// lateBy bounds how late a due message may arrive on a real broker: the
// unit's rounding is in the due time already, so this is the broker's
// latency through the levels and the dead-lettering.
const lateBy = 400 * time.Millisecond

// delayedQueue declares the delay infrastructure and a queue of this case
// bound to its deliver exchange.
func (e *env) delayedQueue(c transport.Transport, name string) string {
	e.t.Helper()
	q := e.name(name)
	bd, err := delay.Bind(q)
	if err != nil {
		e.t.Fatal(err)
	}
	e.declare(c, delay.Topology())
	e.declare(c, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true}}, Bindings: []transport.Binding{bd}})
	return q
}

func (e *env) publishAfter(c transport.Transport, queue, body string, d time.Duration) time.Duration {
	e.t.Helper()
	r, err := delay.RouteTo(queue, d)
	if err != nil {
		e.t.Fatal(err)
	}
	if !e.publish(c, transport.Publishing{Exchange: r.Exchange, RoutingKey: r.Key, Mandatory: true, Body: []byte(body)}).Routed {
		e.t.Fatalf("%s after %v: not routed", body, d)
	}
	return r.Wait
}

// testDelayWalk: messages with delays of 0, 125 ms, 1 s and 2.5 s, published
// together, each arrive no earlier than due (nothing there 60 ms before)
// and, on a real broker, late by less than lateBy.
func testDelayWalk(t *testing.T, e *env) {
	c := e.conn()
	q := e.delayedQueue(c, "dest")
	delays := []time.Duration{2500 * time.Millisecond, 0, time.Second, delay.Unit}
	start := time.Now()
	due := map[string]time.Duration{}
	for _, d := range delays {
		due[d.String()] = e.publishAfter(c, q, d.String(), d)
	}
	s := e.consume(c, q, 10)
	slices.Sort(delays)
	const before = 60 * time.Millisecond
	var passed time.Duration // on the transport's clock
	for _, d := range delays {
		if w := d - before - passed; w > 0 {
			e.advance(w)
			passed += w
			select {
			case m := <-s.Deliveries():
				t.Fatalf("%q arrived %v before %v was due", m.Body, d-passed, d)
			default:
			}
		}
		if w := d - passed; w > 0 {
			e.advance(w)
			passed += w
		}
		m := e.recvBody(s, d.String())
		late := time.Since(start) - due[d.String()]
		t.Logf("delay %v: arrived %v after due (real time; on a virtual clock, meaningless)", d, late)
		if late > lateBy {
			t.Errorf("delay %v: arrived %v late, over %v", d, late, lateBy)
		}
		e.ack(m)
	}
}

// testDelayUndeliverable: a message due for a queue that does not exist
// waits in the undeliverable queue, and arrives once the queue exists and
// delay.Redeliver runs.
func testDelayUndeliverable(t *testing.T, e *env) {
	c := e.conn()
	e.declare(c, delay.Topology())
	q := e.name("late")
	e.publishAfter(c, q, "m", delay.Unit)
	e.advance(delay.Unit)
	e.eventually(func() (bool, string) {
		info, err := c.Inspect(e.ctx(), delay.Undeliverable)
		return err == nil && info.Messages >= 1, "nothing in " + delay.Undeliverable
	})
	e.delayedQueue(c, "late")
	// A server's redeliver loop in the same vhost may move it first; either
	// way it arrives.
	if _, err := delay.Redeliver(e.ctx(), c); err != nil {
		t.Fatal(err)
	}
	d := e.recvBody(e.consume(c, q, 1), "m")
	if d.RoutingKey != q { // straight to the queue, by the default exchange
		t.Errorf("routing key %q, want %q", d.RoutingKey, q)
	}
}
