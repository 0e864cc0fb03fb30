package memory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// fixture is a broker, one connection and helpers. The memory broker
// delivers synchronously, so recv and none never wait.
type fixture struct {
	t   *testing.T
	b   *memory.Broker
	c   *memory.Conn
	ctx context.Context
}

func setup(t *testing.T, opts ...memory.Option) *fixture {
	t.Helper()
	t.Parallel()
	b := memory.New(opts...)
	c := b.Connect()
	t.Cleanup(func() { _ = b.Close() })
	return &fixture{t: t, b: b, c: c, ctx: context.Background()}
}

func (f *fixture) declare(top transport.Topology) {
	f.t.Helper()
	if err := f.c.Declare(f.ctx, top); err != nil {
		f.t.Fatalf("Declare: %v", err)
	}
}

func (f *fixture) queue(name string, args map[string]any) {
	f.t.Helper()
	f.declare(transport.Topology{Queues: []transport.Queue{{Name: name, Durable: true, Args: args}}})
}

func (f *fixture) publish(p transport.Publishing) transport.Confirmation {
	f.t.Helper()
	conf, err := f.c.Publish(f.ctx, p)
	if err != nil {
		f.t.Fatalf("Publish: %v", err)
	}
	return conf
}

func (f *fixture) send(queue, body string) {
	f.t.Helper()
	if !f.publish(transport.Publishing{RoutingKey: queue, Mandatory: true, Body: []byte(body)}).Routed {
		f.t.Fatalf("publish to %q not routed", queue)
	}
}

func (f *fixture) consume(queue string, prefetch int) transport.Subscription {
	f.t.Helper()
	s, err := f.c.Consume(f.ctx, queue, transport.ConsumeOptions{Prefetch: prefetch})
	if err != nil {
		f.t.Fatalf("Consume: %v", err)
	}
	f.t.Cleanup(func() { _ = s.Close() })
	return s
}

// recv takes a delivery that must already be there.
func (f *fixture) recv(s transport.Subscription, body string) transport.Delivery {
	f.t.Helper()
	select {
	case d, ok := <-s.Deliveries():
		if !ok {
			f.t.Fatal("Deliveries closed")
		}
		if string(d.Body) != body {
			f.t.Fatalf("received %q, want %q", d.Body, body)
		}
		return d
	default:
		f.t.Fatalf("nothing delivered, want %q", body)
	}
	return transport.Delivery{}
}

func (f *fixture) none(s transport.Subscription) {
	f.t.Helper()
	select {
	case d, ok := <-s.Deliveries():
		if ok {
			f.t.Fatalf("unexpected delivery %q", d.Body)
		}
	default:
	}
}

func (f *fixture) ack(d transport.Delivery) {
	f.t.Helper()
	if err := d.Ack(); err != nil {
		f.t.Fatalf("Ack: %v", err)
	}
}

func (f *fixture) reject(d transport.Delivery, requeue bool) {
	f.t.Helper()
	if err := d.Reject(requeue); err != nil {
		f.t.Fatalf("Reject: %v", err)
	}
}

// bodies returns the bodies of the ready messages of queue.
func (f *fixture) bodies(queue string) []string {
	var out []string
	for _, d := range f.b.Peek(queue) {
		out = append(out, string(d.Body))
	}
	return out
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

// deaths returns the x-death entries of h.
func deaths(t *testing.T, h map[string]any) []map[string]any {
	t.Helper()
	arr, ok := h["x-death"].([]any)
	if !ok {
		t.Fatalf("x-death = %#v", h["x-death"])
	}
	out := make([]map[string]any, len(arr))
	for i, e := range arr {
		if out[i], ok = e.(map[string]any); !ok {
			t.Fatalf("x-death[%d] = %#v", i, e)
		}
	}
	return out
}
