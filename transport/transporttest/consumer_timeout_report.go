package transporttest

import (
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// ConsumerTimeoutReported holds a transport to telling its user when the
// broker takes deliveries back for its consumer timeout, on a broker
// configured as for ConsumerTimeout: a subscription with
// ConsumeOptions.OnConsumerTimeout is told once per closed channel, with
// the timeout the broker stated (RabbitMQ's "Timeout value used: N ms",
// the memory broker's WithConsumerTimeout), and told before the delivery
// that timed out comes back to it, so that a server can mark the handlers
// still running on that channel before their redeliveries reach it. A
// subscription of the same transport whose channel did not close is not
// told.
//
// It is not one of Run's cases, for the reason ConsumerTimeout is not.
func ConsumerTimeoutReported(t *testing.T, h Harness, timeout time.Duration) {
	if h.New == nil || h.Advance == nil {
		t.Fatal("transporttest: Harness needs both New and Advance")
	}
	e := &env{t: t, h: h, prefix: "acemq-tt." + runID() + ".ConsumerTimeoutReported"}
	c := e.conn()
	q := e.queue(c, "q", nil)
	other := e.queue(c, "other", nil)
	e.send(c, q, "late")
	e.send(c, q, "prompt")
	e.send(c, other, "elsewhere")

	told := make(chan time.Duration, 8)
	bystander := make(chan time.Duration, 8)
	sub := e.consumeTold(c, q, 2, told)
	quiet := e.consumeTold(c, other, 1, bystander)
	late := e.recvBody(sub, "late")
	e.ack(e.recvBody(sub, "prompt"))
	e.ack(e.recvBody(quiet, "elsewhere"))

	e.advance(timeout)
	again := e.recvBody(sub, "late")
	select { // already: the report comes before the redelivery
	case got := <-told:
		if got != timeout {
			t.Errorf("OnConsumerTimeout told %v, want the broker's %v", got, timeout)
		}
	default:
		t.Fatal("the delivery came back before OnConsumerTimeout was told its channel had timed out")
	}
	if !again.Redelivered {
		t.Error("a delivery given back by a consumer timeout is not marked redelivered")
	}
	if err := late.Ack(); !errors.Is(err, transport.ErrStaleDelivery) {
		t.Errorf("Ack of the delivery that timed out = %v, want ErrStaleDelivery", err)
	}
	e.ack(again)
	e.none(sub)
	select {
	case got := <-told:
		t.Errorf("OnConsumerTimeout told again (%v) with nothing held past the timeout", got)
	default:
	}
	select {
	case got := <-bystander:
		t.Errorf("the subscription of another queue, whose channel did not close, was told of a consumer timeout (%v)", got)
	default:
	}
	e.depth(c, q, 0)
}

// consumeTold subscribes to queue with every consumer-timeout report sent
// to told (never blocking: a full told drops the report, which the case
// then misses); the test closes the subscription when it ends.
func (e *env) consumeTold(c transport.Transport, queue string, prefetch int, told chan<- time.Duration) transport.Subscription {
	e.t.Helper()
	s, err := c.Consume(e.ctx(), queue, transport.ConsumeOptions{Prefetch: prefetch, OnConsumerTimeout: func(d time.Duration) {
		select {
		case told <- d:
		default:
		}
	}})
	if err != nil {
		e.t.Fatalf("Consume %q: %v", queue, err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}
