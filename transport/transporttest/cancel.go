package transporttest

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// QueueDeleter is a transport that can delete a queue (queue.delete), as
// both of ours can. The cases that delete a queue under a consumer need
// it, and skip on a transport without it, saying so (outside CI).
type QueueDeleter = transport.QueueDeleter

// testQueueDeleted: a queue deleted under a consumer cancels it, as
// RabbitMQ's basic.cancel does: Deliveries closes and Err says
// ErrCancelled, naming the queue, and still does after Close. What the
// consumer held stays settleable and settling it does nothing (RabbitMQ
// 3.10.8 keeps the channel open and ignores the ack).
func testQueueDeleted(t *testing.T, e *env) {
	c := e.conn()
	del := e.deleter(c)
	q := e.queue(c, "q", nil)
	e.send(c, q, "held")
	sub := e.consume(c, q, 1)
	held := e.recvBody(sub, "held")
	if err := sub.Err(); err != nil {
		t.Fatalf("Err while the subscription runs = %v, want nil", err)
	}

	if err := del.DeleteQueue(e.ctx(), q); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	e.closes(sub)
	err := sub.Err()
	if !errors.Is(err, transport.ErrCancelled) {
		t.Fatalf("Err after the queue was deleted = %v, want ErrCancelled", err)
	}
	if !strings.Contains(err.Error(), q) {
		t.Errorf("Err %q does not name the queue %q", err, q)
	}
	if err := held.Ack(); err != nil {
		t.Errorf("Ack of a delivery held when its queue was deleted = %v, want nil (it does nothing)", err)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := sub.Err(); !errors.Is(err, transport.ErrCancelled) {
		t.Errorf("Err after Close = %v: it forgot why the subscription ended", err)
	}
	_, err = c.Inspect(e.ctx(), q)
	e.wantErr("Inspect of the deleted queue", err, transport.ErrNotFound)
	if err := del.DeleteQueue(e.ctx(), q); err != nil {
		t.Errorf("deleting a queue that is gone = %v, want nil", err)
	}
}

// testErrNilWhenAsked: a subscription ended by Cancel, by Close or by the
// transport's Close has no Err; nor has one cancelled before its queue
// was deleted.
func testErrNilWhenAsked(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	ends := []struct {
		how string
		end func(c transport.Transport, s transport.Subscription) error
	}{
		{"Cancel", func(_ transport.Transport, s transport.Subscription) error { return s.Cancel(e.ctx()) }},
		{"Close", func(_ transport.Transport, s transport.Subscription) error { return s.Close() }},
		{"the transport's Close", func(c transport.Transport, _ transport.Subscription) error { return c.Close() }},
	}
	var cancelled transport.Subscription
	for _, end := range ends {
		own := e.conn() // the last one closes it
		sub := e.consume(own, q, 1)
		if err := end.end(own, sub); err != nil {
			t.Fatalf("%s: %v", end.how, err)
		}
		e.closes(sub)
		if err := sub.Err(); err != nil {
			t.Errorf("Err after %s = %v, want nil", end.how, err)
		}
		if cancelled == nil {
			cancelled = sub
		}
	}
	if del, ok := c.(QueueDeleter); ok {
		if err := del.DeleteQueue(e.ctx(), q); err != nil {
			t.Fatalf("DeleteQueue: %v", err)
		}
		if err := cancelled.Err(); err != nil {
			t.Errorf("Err of a subscription cancelled before its queue was deleted = %v, want nil", err)
		}
	}
}

// ConsumerTimeout holds a transport to what RabbitMQ does past its
// consumer_timeout, on a broker configured with timeout (RabbitMQ:
// consumer_timeout, with a channel_tick_interval well under it, since the
// broker checks on that tick; memory: WithConsumerTimeout). A delivery
// left unacknowledged that long closes its channel (406); the subscription
// consumes again, Deliveries stays open and Err nil, the delivery comes
// back marked redelivered, a late settlement of the old one is
// ErrStaleDelivery, and a delivery acked in time stays acked.
//
// It is not one of Run's cases: the brokers Run is given have no such
// timeout (RabbitMQ's default is 30 minutes), and setting one is a
// broker's configuration.
func ConsumerTimeout(t *testing.T, h Harness, timeout time.Duration) {
	if h.New == nil || h.Advance == nil {
		t.Fatal("transporttest: Harness needs both New and Advance")
	}
	e := &env{t: t, h: h, prefix: "acemq-tt." + runID() + ".ConsumerTimeout"}
	c := e.conn()
	q := e.queue(c, "q", nil)
	e.send(c, q, "late")
	e.send(c, q, "prompt")
	sub := e.consume(c, q, 2)
	late := e.recvBody(sub, "late")
	e.ack(e.recvBody(sub, "prompt"))

	e.advance(timeout)
	again := e.recvBody(sub, "late")
	if !again.Redelivered {
		t.Error("a delivery given back by a consumer timeout is not marked redelivered")
	}
	if err := late.Ack(); !errors.Is(err, transport.ErrStaleDelivery) {
		t.Errorf("Ack of the delivery that timed out = %v, want ErrStaleDelivery", err)
	}
	if err := sub.Err(); err != nil {
		t.Errorf("Err = %v: a consumer timeout should not end the subscription", err)
	}
	e.ack(again)
	e.none(sub)
	e.depth(c, q, 0)
}

// deleter returns c's DeleteQueue. A transport without one skips the
// case, saying so, except under CI, where nothing may skip: both of the
// library's transports have one.
func (e *env) deleter(c transport.Transport) QueueDeleter {
	e.t.Helper()
	del, ok := c.(QueueDeleter)
	if !ok {
		msg := fmt.Sprintf("%T cannot delete a queue (no DeleteQueue method): nothing to delete under a consumer", c)
		if os.Getenv("CI") != "" {
			e.t.Fatal(msg)
		}
		e.t.Skip(msg)
	}
	return del
}

// closes waits until s's Deliveries closes, failing on a delivery or
// after wait.
func (e *env) closes(s transport.Subscription) {
	e.t.Helper()
	select {
	case d, ok := <-s.Deliveries():
		if ok {
			e.t.Fatalf("unexpected delivery %q where Deliveries should close", d.Body)
		}
	case <-time.After(wait):
		e.t.Fatalf("Deliveries still open after %v", wait)
	}
}
