package transporttest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// env is one case's setup: its test, the harness and a name prefix no
// other case or run uses.
type env struct {
	t      *testing.T
	h      Harness
	prefix string
}

// name returns a queue or exchange name unique to this case.
func (e *env) name(s string) string { return e.prefix + "." + s }

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	e.t.Cleanup(cancel)
	return ctx
}

// conn opens a transport that the test closes when it ends.
func (e *env) conn() transport.Transport {
	e.t.Helper()
	c := e.h.New(e.t)
	if c == nil {
		e.t.Fatal("Harness.New returned nil")
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (e *env) advance(d time.Duration) { e.h.Advance(e.t, d) }

func (e *env) declare(c transport.Transport, top transport.Topology) {
	e.t.Helper()
	if err := c.Declare(e.ctx(), top); err != nil {
		e.t.Fatalf("Declare: %v", err)
	}
}

// queue declares a durable queue with args and returns its name.
func (e *env) queue(c transport.Transport, name string, args map[string]any) string {
	e.t.Helper()
	q := e.name(name)
	e.declare(c, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true, Args: args}}})
	return q
}

func (e *env) publish(c transport.Transport, p transport.Publishing) transport.Confirmation {
	e.t.Helper()
	conf, err := c.Publish(e.ctx(), p)
	if err != nil {
		e.t.Fatalf("Publish to %q/%q: %v", p.Exchange, p.RoutingKey, err)
	}
	return conf
}

// send publishes body to queue through the default exchange, mandatory,
// and checks it was routed.
func (e *env) send(c transport.Transport, queue, body string) {
	e.t.Helper()
	p := transport.Publishing{RoutingKey: queue, Mandatory: true, Body: []byte(body)}
	p.DeliveryMode = 2
	if conf := e.publish(c, p); !conf.Routed {
		e.t.Fatalf("publish to queue %q: not routed", queue)
	}
}

// consume subscribes to queue; the test closes the subscription when it
// ends.
func (e *env) consume(c transport.Transport, queue string, prefetch int) transport.Subscription {
	e.t.Helper()
	s, err := c.Consume(e.ctx(), queue, transport.ConsumeOptions{Prefetch: prefetch})
	if err != nil {
		e.t.Fatalf("Consume %q: %v", queue, err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

// recv returns the next delivery, failing the test after wait.
func (e *env) recv(s transport.Subscription) transport.Delivery {
	e.t.Helper()
	select {
	case d, ok := <-s.Deliveries():
		if !ok {
			e.t.Fatal("Deliveries closed while a delivery was expected")
		}
		return d
	case <-time.After(wait):
		e.t.Fatalf("no delivery within %v", wait)
	}
	return transport.Delivery{}
}

// recvBody receives the next delivery and checks its body.
func (e *env) recvBody(s transport.Subscription, body string) transport.Delivery {
	e.t.Helper()
	d := e.recv(s)
	if string(d.Body) != body {
		e.t.Fatalf("received body %q, want %q", d.Body, body)
	}
	return d
}

// none checks that nothing is delivered for quiet.
func (e *env) none(s transport.Subscription) {
	e.t.Helper()
	select {
	case d, ok := <-s.Deliveries():
		if ok {
			e.t.Fatalf("unexpected delivery %q (redelivered %v)", d.Body, d.Redelivered)
		}
	case <-time.After(quiet):
	}
}

func (e *env) ack(d transport.Delivery) {
	e.t.Helper()
	if err := d.Ack(); err != nil {
		e.t.Fatalf("Ack %q: %v", d.Body, err)
	}
}

func (e *env) reject(d transport.Delivery, requeue bool) {
	e.t.Helper()
	if err := d.Reject(requeue); err != nil {
		e.t.Fatalf("Reject(%v) %q: %v", requeue, d.Body, err)
	}
}

// depth waits until queue holds n ready messages (settling and requeueing
// are asynchronous on a real broker).
func (e *env) depth(c transport.Transport, queue string, n int) {
	e.t.Helper()
	e.eventually(func() (bool, string) {
		info, err := c.Inspect(e.ctx(), queue)
		if err != nil {
			return false, fmt.Sprintf("Inspect %q: %v", queue, err)
		}
		return info.Messages == n, fmt.Sprintf("queue %q holds %d ready messages, want %d", queue, info.Messages, n)
	})
}

// eventually polls cond until it holds, failing with its last word after
// wait.
func (e *env) eventually(cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatal(why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantErr checks that err is target.
func (e *env) wantErr(what string, err, target error) {
	e.t.Helper()
	if !errors.Is(err, target) {
		e.t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

// asInt reads an integer header value of any width.
func asInt(v any) (int64, bool) { return transport.Int64(v) }

// wantInt checks that headers[key] is the integer n.
func (e *env) wantInt(headers map[string]any, key string, n int64) {
	e.t.Helper()
	got, ok := asInt(headers[key])
	if !ok || got != n {
		e.t.Fatalf("header %q = %#v, want the integer %d", key, headers[key], n)
	}
}

// wantString checks that m[key] is the string s.
func (e *env) wantString(m map[string]any, key, s string) {
	e.t.Helper()
	if got, ok := m[key].(string); !ok || got != s {
		e.t.Fatalf("%q = %#v, want %q", key, m[key], s)
	}
}
