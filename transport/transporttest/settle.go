package transporttest

import (
	"testing"

	"github.com/acemq/acemq/transport"
)

// testRejectRequeue: a rejected-with-requeue message comes back marked
// redelivered, ahead of later ones.
func testRejectRequeue(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	e.send(c, q, "first")
	e.send(c, q, "second")
	sub := e.consume(c, q, 1)

	d := e.recvBody(sub, "first")
	if d.Redelivered {
		t.Error("first delivery marked redelivered")
	}
	e.reject(d, true)
	again := e.recvBody(sub, "first")
	if !again.Redelivered {
		t.Error("requeued delivery not marked redelivered")
	}
	e.ack(again)
	second := e.recvBody(sub, "second")
	if second.Redelivered {
		t.Error("second delivery marked redelivered")
	}
	e.ack(second)
}

// testSettleTwice: settling a delivery again, or after its subscription
// closed, is ErrStaleDelivery, and does no harm to the transport (on
// RabbitMQ a double ack would close the channel: the transport guards).
func testSettleTwice(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	for _, b := range []string{"a", "b", "c"} {
		e.send(c, q, b)
	}
	sub := e.consume(c, q, 1)

	a := e.recvBody(sub, "a")
	e.ack(a)
	e.wantErr("second Ack", a.Ack(), transport.ErrStaleDelivery)
	e.wantErr("Reject after Ack", a.Reject(true), transport.ErrStaleDelivery)

	b := e.recvBody(sub, "b")
	e.reject(b, true)
	e.wantErr("Ack after Reject(requeue)", b.Ack(), transport.ErrStaleDelivery)
	b = e.recvBody(sub, "b")
	e.ack(b)

	// The transport still works: c arrives and is acked normally.
	cd := e.recvBody(sub, "c")
	if err := sub.Close(); err != nil {
		t.Fatalf("subscription Close: %v", err)
	}
	e.wantErr("Ack after the subscription closed", cd.Ack(), transport.ErrStaleDelivery)

	sub2 := e.consume(c, q, 1)
	cd = e.recvBody(sub2, "c")
	if !cd.Redelivered {
		t.Error("delivery given back by Close not marked redelivered")
	}
	e.ack(cd)
	e.depth(c, q, 0)
}

// testGet: basic.get on an empty and a non-empty queue; a got delivery is
// settled like any other.
func testGet(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	// get takes the next message, waiting for it to be back when want is
	// set (a requeue is asynchronous on RabbitMQ); want "" expects none.
	get := func(want string) transport.Delivery {
		t.Helper()
		var d transport.Delivery
		e.eventually(func() (bool, string) {
			var ok bool
			var err error
			d, ok, err = c.Get(e.ctx(), q)
			switch {
			case err != nil:
				t.Fatalf("Get: %v", err)
			case want == "" && ok:
				t.Fatalf("Get on an empty queue returned %q", d.Body)
			case want != "" && ok && string(d.Body) != want:
				t.Fatalf("Get = %q, want %q", d.Body, want)
			}
			return ok == (want != ""), "Get found nothing, want " + want
		})
		if want != "" && d.Queue != q {
			t.Errorf("Get delivery queue %q, want %q", d.Queue, q)
		}
		return d
	}

	get("")
	e.send(c, q, "one")
	e.send(c, q, "two")

	d := get("one")
	if d.Redelivered {
		t.Error("first Get marked redelivered")
	}
	e.reject(d, true)
	d = get("one")
	if !d.Redelivered {
		t.Error("Get after a requeue not marked redelivered")
	}
	e.ack(d)
	e.wantErr("second Ack of a got delivery", d.Ack(), transport.ErrStaleDelivery)
	e.ack(get("two"))
	get("")

	_, _, err := c.Get(e.ctx(), e.name("missing"))
	e.wantErr("Get on a missing queue", err, transport.ErrNotFound)
}

// testRequeueRestoresOrder: given-back messages return to their original
// places, ahead of the rest, whatever order they were rejected in.
func testRequeueRestoresOrder(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	a, b, cd := e.threeOfFour(c, q)
	e.reject(cd, true)
	e.reject(a, true)
	e.ack(b)
	e.depth(c, q, 3)

	sub2 := e.consume(c, q, 3)
	for _, want := range []string{"a", "c", "d"} {
		d := e.recvBody(sub2, want)
		if d.Redelivered != (want != "d") {
			t.Errorf("%s redelivered %v", want, d.Redelivered)
		}
		e.ack(d)
	}
}

// testQuorumReturnOrder: a quorum queue puts what is given back at the
// back, in the order it came back, unless it has a delivery limit: then
// it serves it first (RabbitMQ 3.10).
func testQuorumReturnOrder(t *testing.T, e *env) {
	for _, tt := range []struct {
		name string
		args map[string]any
		want []string
	}{
		{"no-limit", map[string]any{"x-queue-type": "quorum"}, []string{"d", "c", "a", "b"}},
		{"limit", map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 10}, []string{"c", "a", "b", "d"}},
	} {
		c := e.conn()
		q := e.queue(c, "quorum."+tt.name, tt.args)
		a, b, cd := e.threeOfFour(c, q)
		e.reject(cd, true)
		e.reject(a, true)
		e.reject(b, true)
		e.depth(c, q, 4)
		sub2 := e.consume(c, q, 4)
		for _, want := range tt.want {
			d := e.recvBody(sub2, want)
			if d.Redelivered != (want != "d") {
				t.Errorf("%s: %s redelivered %v", tt.name, want, d.Redelivered)
			}
			e.ack(d)
		}
	}
}

// threeOfFour sends a, b, c and d to q and takes a, b and c, unsettled, on
// a consumer it then cancels: d stays ready.
func (e *env) threeOfFour(c transport.Transport, q string) (a, b, cd transport.Delivery) {
	e.t.Helper()
	for _, body := range []string{"a", "b", "c", "d"} {
		e.send(c, q, body)
	}
	sub := e.consume(c, q, 3)
	a, b, cd = e.recvBody(sub, "a"), e.recvBody(sub, "b"), e.recvBody(sub, "c")
	if err := sub.Cancel(e.ctx()); err != nil {
		e.t.Fatalf("Cancel: %v", err)
	}
	for range sub.Deliveries() { // drain until the broker stopped
	}
	return a, b, cd
}
