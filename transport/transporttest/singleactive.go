package transporttest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/acemq/acemq/transport"
)

// Single active consumer (x-single-active-consumer: true), what an
// ordered partition is declared with: one consumer of the queue receives,
// the others wait and take over in registration order. Checked against
// RabbitMQ 3.10.8.
func init() {
	cases = append(cases,
		testCase{"SingleActiveConsumerClose", testSingleActiveClose},
		testCase{"SingleActiveConsumerQuorumCancel", testSingleActiveQuorumCancel},
		testCase{"SingleActiveConsumerRedeclare", testSingleActiveRedeclare},
		testCase{"SingleActiveConsumerPrefetch", testSingleActivePrefetch},
	)
}

// singleActive is the argument that makes a queue single-active-consumer,
// with x-queue-type when quorum.
func singleActive(quorum bool) map[string]any {
	args := map[string]any{"x-single-active-consumer": true}
	if quorum {
		args["x-queue-type"] = "quorum"
	}
	return args
}

// sacPair declares a single-active-consumer queue and consumes it twice, a
// first and then b, each at prefetch 2 on a connection of its own, before
// anything is published (amqp091-go issue 106's order); then publishes
// m1..m4.
func sacPair(e *env, quorum bool) (pub transport.Transport, q string, a, b transport.Subscription, ca transport.Transport) {
	pub = e.conn()
	q = e.queue(pub, "sac", singleActive(quorum))
	ca = e.conn()
	a = e.consume(ca, q, 2)
	b = e.consume(e.conn(), q, 2)
	for i := 1; i <= 4; i++ {
		e.send(pub, q, fmt.Sprint("m", i))
	}
	return pub, q, a, b, ca
}

// activeTakesAll: everything goes to a, one delivery at a time whatever
// its prefetch (the amqp transport's second consumer, added after the
// probation, registers behind b and waits: memory's singleactive.go), and
// b gets nothing. a acks m1 and holds m2.
func activeTakesAll(t *testing.T, e *env, pub transport.Transport, q string, a, b transport.Subscription) transport.Delivery {
	t.Helper()
	d1 := e.recvBody(a, "m1")
	if d1.Redelivered {
		t.Error("m1 is marked redelivered")
	}
	e.none(a) // one at a time: the prefetch of 2 does not apply
	e.ack(d1)
	m2 := e.recvBody(a, "m2")
	e.none(b)
	e.depth(pub, q, 2)
	return m2
}

// testSingleActiveClose: with two consumers on a classic
// single-active-consumer queue only the first receives; closing it (its
// channel) gives back what it held, and the second takes over: the given
// back message first, redelivered, then the ready ones in their order.
// The inspected consumer count is every consumer (the active one's second
// included once its probation ended).
//
// Closed, not cancelled: on RabbitMQ 3.10.8 a classic queue whose active
// consumer is cancelled while it holds a delivery serves no one, and the
// next publish crashes the queue process ({badmatch,false} in
// rabbit_amqqueue_process:attempt_delivery, rabbitmq-server#5460), which
// cancels every consumer. A quorum queue does not (the case below).
func testSingleActiveClose(t *testing.T, e *env) {
	pub, q, a, b, _ := sacPair(e, false)
	m2 := activeTakesAll(t, e, pub, q, a, b)
	e.eventually(func() (bool, string) {
		info, err := pub.Inspect(e.ctx(), q)
		if err != nil {
			return false, fmt.Sprintf("Inspect: %v", err)
		}
		return info.Consumers == 3, fmt.Sprintf("classic queue shows %d consumers, want 3 (the active one, its second, the waiting one)", info.Consumers)
	})

	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := m2.Ack(); err == nil {
		t.Error("acking m2 after its subscription closed succeeded; want it stale")
	}
	d := e.recvBody(b, "m2")
	if !d.Redelivered {
		t.Error("m2, given back by the closed active consumer, is not marked redelivered")
	}
	e.none(b)
	e.ack(d)
	for _, body := range []string{"m3", "m4"} {
		d := e.recvBody(b, body)
		if d.Redelivered {
			t.Errorf("%s is marked redelivered", body)
		}
		e.ack(d)
	}
	e.none(b)
	e.depth(pub, q, 0)
}

// testSingleActiveQuorumCancel: on a quorum queue, cancelling the active
// consumer hands over at once: the second receives the ready messages
// while the first still holds m2, which stays settleable there until its
// subscription closes; then m2 comes back ahead of the ready ones,
// redelivered and counted. A quorum queue shows its active consumer
// alone.
func testSingleActiveQuorumCancel(t *testing.T, e *env) {
	pub, q, a, b, _ := sacPair(e, true)
	m2 := activeTakesAll(t, e, pub, q, a, b)
	info, err := pub.Inspect(e.ctx(), q)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if info.Consumers != 1 {
		t.Errorf("quorum queue shows %d consumers, want 1 (the active one alone)", info.Consumers)
	}

	if err := a.Cancel(e.ctx()); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	e.closes(a)
	m3 := e.recvBody(b, "m3")
	if m3.Redelivered {
		t.Error("m3 is marked redelivered")
	}
	e.none(b)
	if err := a.Close(); err != nil { // gives m2 back
		t.Fatalf("Close: %v", err)
	}
	if err := m2.Ack(); err == nil {
		t.Error("acking m2 after its subscription closed succeeded; want it stale")
	}
	e.depth(pub, q, 2)
	e.ack(m3)
	d := e.recvBody(b, "m2")
	if !d.Redelivered {
		t.Error("m2, given back by the closed consumer, is not marked redelivered")
	}
	e.wantInt(d.Headers, "x-delivery-count", 1)
	e.ack(d)
	e.ack(e.recvBody(b, "m4"))
	e.none(b)
}

// testSingleActiveRedeclare: the argument must be a bool, and a redeclare
// with another value, or without it, is refused as inequivalent, on
// either queue type.
func testSingleActiveRedeclare(t *testing.T, e *env) {
	c := e.conn()
	for _, quorum := range []bool{false, true} {
		kind := map[bool]string{false: "classic", true: "quorum"}[quorum]
		q := e.queue(c, kind, singleActive(quorum))
		for _, tc := range []struct {
			what string
			v    any // nil: without the argument
		}{{"false", false}, {"no argument", nil}} {
			args := singleActive(quorum)
			if tc.v == nil {
				delete(args, "x-single-active-consumer")
			} else {
				args["x-single-active-consumer"] = tc.v
			}
			err := c.Declare(e.ctx(), transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true, Args: args}}})
			e.wantErr(kind+" redeclare with "+tc.what, err, transport.ErrPreconditionFailed)
			if msg := err.Error(); !strings.Contains(msg, q) || !strings.Contains(msg, "x-single-active-consumer") {
				t.Errorf("%s redeclare with %s: %q names neither the queue nor the argument", kind, tc.what, msg)
			}
		}
		e.declare(c, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true, Args: singleActive(quorum)}}})

		bad := singleActive(quorum)
		bad["x-single-active-consumer"] = "true"
		err := c.Declare(e.ctx(), transport.Topology{Queues: []transport.Queue{{Name: e.name(kind + ".string"), Durable: true, Args: bad}}})
		e.wantErr(kind+" queue declared with the string \"true\"", err, transport.ErrPreconditionFailed)
		if msg := err.Error(); !strings.Contains(msg, "x-single-active-consumer") {
			t.Errorf("%s queue declared with a string: %q does not name the argument", kind, msg)
		}
	}
}

// testSingleActivePrefetch: told the queue is single-active-consumer
// (ConsumeOptions.SingleActive), the active consumer takes up to its
// prefetch from its first delivery, with no probation, on either queue
// type; the one behind it still gets nothing; and it is one consumer,
// not two, in Inspect (a classic queue shows both subscriptions, a
// quorum queue its active one alone).
func testSingleActivePrefetch(t *testing.T, e *env) {
	for _, quorum := range []bool{false, true} {
		kind := map[bool]string{false: "classic", true: "quorum"}[quorum]
		pub := e.conn()
		q := e.queue(pub, kind+".prefetch", singleActive(quorum))
		a := e.consumeSingle(e.conn(), q, 3)
		b := e.consumeSingle(e.conn(), q, 3)
		for i := 1; i <= 5; i++ {
			e.send(pub, q, fmt.Sprint("m", i))
		}
		held := []transport.Delivery{e.recvBody(a, "m1"), e.recvBody(a, "m2"), e.recvBody(a, "m3")}
		e.none(a) // the prefetch, 3, is full
		e.none(b)
		want := map[bool]int{false: 2, true: 1}[quorum]
		e.eventually(func() (bool, string) {
			info, err := pub.Inspect(e.ctx(), q)
			if err != nil {
				return false, fmt.Sprintf("Inspect: %v", err)
			}
			return info.Consumers == want, fmt.Sprintf("%s queue shows %d consumers, want %d", kind, info.Consumers, want)
		})
		for _, d := range held {
			e.ack(d)
		}
		e.ack(e.recvBody(a, "m4"))
		e.ack(e.recvBody(a, "m5"))
		e.none(b)
		e.depth(pub, q, 0)
	}
}

// consumeSingle subscribes to a single-active-consumer queue, saying so;
// the test closes the subscription when it ends.
func (e *env) consumeSingle(c transport.Transport, queue string, prefetch int) transport.Subscription {
	e.t.Helper()
	s, err := c.Consume(e.ctx(), queue, transport.ConsumeOptions{Prefetch: prefetch, SingleActive: true})
	if err != nil {
		e.t.Fatalf("Consume %q: %v", queue, err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}
