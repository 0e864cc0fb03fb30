package transporttest

import (
	"slices"
	"testing"
	"time"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

// lateBy bounds how late a due message may arrive on a real broker,
// counted from just before its publish to when the consumer received it:
// the unit's rounding is in the due time already, so this is the broker's
// latency through the levels and the dead-lettering, and the scheduling of
// a busy machine. The path a message took is checked exactly by its
// x-death in DelayLevels (one entry per level it waited on), so this bound
// need not be tight to catch a wrong route; it catches a message held up on the way
// (through the undeliverable queue, 10 s; a stuck level), and is generous
// enough that two test runs and a load on both cores do not reach it.
const lateBy = 2 * time.Second

// skew is the broker's rounding of a TTL to whole milliseconds, and of
// the clocks compared: a message this much before due is not early.
const skew = 5 * time.Millisecond

// early is how early a message due after wait may arrive and not count
// as early: skew, and 1% of the wait. RabbitMQ's TTLs run on Erlang's
// monotonic clock, which time correction speeds up or slows down by up
// to 1% while the VM catches up with an OS clock that was stepped
// (measured on the shared node here: 5 001 ms of erlang:monotonic_time
// in 4 953 ms of os:perf_counter, and messages 15 ms early at 3 s).
func early(wait time.Duration) time.Duration { return skew + wait/100 }

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

// recvWithin returns the next delivery, failing the test after within: for
// a delivery due later than wait after the call.
func (e *env) recvWithin(s transport.Subscription, within time.Duration) transport.Delivery {
	e.t.Helper()
	select {
	case d, ok := <-s.Deliveries():
		if !ok {
			e.t.Fatal("Deliveries closed while a delivery was expected")
		}
		return d
	case <-time.After(within):
		e.t.Fatalf("no delivery within %v", within)
	}
	return transport.Delivery{}
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
// together, each arrive no earlier than due and, on a real broker, late by
// less than lateBy. On a virtual clock, nothing is there 60 ms before it is
// due, and everything is when it is. On a real one, each message's time is
// counted from just before its own publish to when it was received, so a
// machine too busy to publish, consume or look at once makes nothing look
// early or late that was not.
func testDelayWalk(t *testing.T, e *env) {
	c := e.conn()
	q := e.delayedQueue(c, "dest")
	delays := []time.Duration{2500 * time.Millisecond, 0, time.Second, delay.Unit}
	if _, virtual := virtualClock(c); !virtual {
		s := e.consume(c, q, 10) // before the publishes: a delivery is seen when it comes
		published := map[string]time.Time{}
		due := map[string]time.Duration{}
		for _, d := range delays {
			published[d.String()] = time.Now()
			due[d.String()] = e.publishAfter(c, q, d.String(), d)
		}
		for range delays {
			m := e.recvWithin(s, 2500*time.Millisecond+wait)
			at := time.Now()
			body := string(m.Body)
			sent, ok := published[body]
			if !ok {
				t.Fatalf("received %q, not one of the messages published", m.Body)
			}
			delete(published, body)
			late := at.Sub(sent) - due[body]
			t.Logf("delay %s: arrived %v after due", body, late)
			switch {
			case late < -early(due[body]):
				t.Errorf("delay %s: arrived %v early", body, -late)
			case late > lateBy:
				t.Errorf("delay %s: arrived %v late, over %v", body, late, lateBy)
			}
			e.ack(m)
		}
		return
	}
	for _, d := range delays {
		e.publishAfter(c, q, d.String(), d)
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
		e.ack(e.recvBody(s, d.String()))
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
