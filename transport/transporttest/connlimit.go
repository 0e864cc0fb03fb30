package transporttest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// ConnectionLimiter reaches the broker behind a Harness as an operator
// does, for ConnectionLimit.
type ConnectionLimiter struct {
	// Limit sets the max-connections of the transport's vhost to n; a
	// negative n lifts it. RabbitMQ: `rabbitmqctl set_vhost_limits -p
	// VHOST '{"max-connections": n}'`; memory: Broker.SetConnectionLimit.
	Limit func(tb testing.TB, n int)
	// CloseAll closes the client connections of the transport's vhost.
	// RabbitMQ: `rabbitmqctl close_all_connections -p VHOST ...`; memory:
	// Broker.CloseConnections.
	CloseAll func(tb testing.TB)
}

// limitWait bounds each wait of ConnectionLimit: on RabbitMQ a refused
// connection is dialled again with backoff, up to the transport's maximum
// wait (10 s by default).
const limitWait = 45 * time.Second

// ConnectionLimit holds a transport to what a connection limit reached on
// reconnect means (RabbitMQ 530 "access to vhost 'v' refused for user
// 'u': connection limit (N) is reached"): a refusal for now, never the end
// of a subscription. A consumer holding an unacknowledged delivery has its
// connection closed while the vhost allows no connection: its
// ConsumeOptions.OnRefused is told of the refusal (transport.ErrRefused,
// a *transport.RefusedError with cause connection_limit and the broker's
// words), Deliveries stays open and Err nil, nothing is delivered, and the
// held delivery is stale. Once the limit is lifted, OnRefused is told nil
// and every message arrives, the held one again and marked redelivered,
// in order: none is lost.
//
// It is not one of Run's cases: it changes the vhost's limit and closes
// every connection in it, which cases sharing the vhost would not survive.
// Give it a Harness on a vhost of its own.
func ConnectionLimit(t *testing.T, h Harness, l ConnectionLimiter) {
	if h.New == nil || h.Advance == nil || l.Limit == nil || l.CloseAll == nil {
		t.Fatal("transporttest: ConnectionLimit needs Harness.New, Harness.Advance, Limit and CloseAll")
	}
	e := &env{t: t, h: h, prefix: "acemq-tt." + runID() + ".ConnectionLimit"}
	c := e.conn()
	q := e.queue(c, "q", nil)
	for _, body := range []string{"a", "b", "c"} {
		e.send(c, q, body)
	}
	reports := make(chan error, 1024)
	sub, err := c.Consume(e.ctx(), q, transport.ConsumeOptions{Prefetch: 1, OnRefused: func(err error) {
		select {
		case reports <- err:
		default: // a test that has stopped reading
		}
	}})
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	held := e.recvBody(sub, "a")

	t.Cleanup(func() { l.Limit(t, -1) })
	l.Limit(t, 0)
	l.CloseAll(t)

	refusal := nextReport(t, reports, "a refusal after the connection was closed at the limit")
	if refusal == nil {
		t.Fatal("OnRefused was told nil (connected again) while the vhost allows no connection")
	}
	var re *transport.RefusedError
	if !errors.Is(refusal, transport.ErrRefused) || !errors.As(refusal, &re) {
		t.Fatalf("OnRefused got %v, want a *transport.RefusedError matching ErrRefused", refusal)
	}
	if re.Cause != "connection_limit" || !strings.Contains(re.Reason, "connection limit (0) is reached") || re.Tries < 1 {
		t.Errorf("refusal = cause %q, reason %q, tries %d: want cause connection_limit and the broker's words", re.Cause, re.Reason, re.Tries)
	}
	select {
	case d, ok := <-sub.Deliveries():
		if !ok {
			t.Fatalf("Deliveries closed while the broker refused the connection (Err %v): a refusal for now must not end the subscription", sub.Err())
		}
		t.Fatalf("delivery %q while the broker refuses the connection", d.Body)
	case <-time.After(quiet):
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("Err while refused = %v, want nil", err)
	}
	if err := held.Ack(); !errors.Is(err, transport.ErrStaleDelivery) {
		t.Errorf("Ack of a delivery held when its connection closed = %v, want ErrStaleDelivery", err)
	}

	l.Limit(t, -1)
	for {
		r := nextReport(t, reports, "nil (connected again) after the limit was lifted")
		if r == nil {
			break
		}
		if !errors.Is(r, transport.ErrRefused) {
			t.Fatalf("OnRefused got %v, want ErrRefused or nil", r)
		}
	}
	for i, body := range []string{"a", "b", "c"} {
		d := recvWithin(t, sub, limitWait)
		if string(d.Body) != body {
			t.Fatalf("after the limit was lifted, delivery %d is %q, want %q", i+1, d.Body, body)
		}
		if body == "a" && !d.Redelivered {
			t.Error("the delivery held when the connection closed is not marked redelivered")
		}
		e.ack(d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limitWait) // the publish connection may be in its backoff yet
	defer cancel()
	p := transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("d")}
	p.DeliveryMode = 2
	if conf, err := c.Publish(ctx, p); err != nil || !conf.Routed {
		t.Fatalf("publish after the limit was lifted: routed %v, %v", conf.Routed, err)
	}
	if d := recvWithin(t, sub, limitWait); string(d.Body) != "d" {
		t.Fatalf("delivery %q, want d", d.Body)
	} else {
		e.ack(d)
	}
	if err := sub.Err(); err != nil {
		t.Errorf("Err = %v, want nil", err)
	}
	e.none(sub)
	e.depth(c, q, 0)
}

// nextReport is the next report to OnRefused, failing after limitWait.
func nextReport(t *testing.T, reports <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-reports:
		return err
	case <-time.After(limitWait):
		t.Fatalf("no report to OnRefused within %v: want %s", limitWait, what)
	}
	return nil
}

// recvWithin is the next delivery, failing after d.
func recvWithin(t *testing.T, sub transport.Subscription, d time.Duration) transport.Delivery {
	t.Helper()
	select {
	case m, ok := <-sub.Deliveries():
		if !ok {
			t.Fatalf("Deliveries closed (Err %v)", sub.Err())
		}
		return m
	case <-time.After(d):
		t.Fatalf("no delivery within %v", d)
	}
	return transport.Delivery{}
}
