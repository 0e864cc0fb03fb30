package transporttest

import (
	"strings"
	"testing"

	"github.com/acemq/acemq/transport"
)

// testInequivalentRedeclare: a redeclare with other arguments or
// durability is ErrPreconditionFailed naming the queue and the argument;
// the queue is unchanged and the transport goes on working.
func testInequivalentRedeclare(t *testing.T, e *env) {
	c := e.conn()
	args := map[string]any{"x-message-ttl": int64(60000)}
	q := e.queue(c, "q", args)

	for _, tc := range []struct {
		what string
		decl transport.Queue
		arg  string
	}{
		{"another TTL", transport.Queue{Name: q, Durable: true, Args: map[string]any{"x-message-ttl": int64(1000)}}, "x-message-ttl"},
		{"no TTL", transport.Queue{Name: q, Durable: true}, "x-message-ttl"},
		{"not durable", transport.Queue{Name: q, Durable: false, Args: args}, "durable"},
	} {
		err := c.Declare(e.ctx(), transport.Topology{Queues: []transport.Queue{tc.decl}})
		e.wantErr("redeclare with "+tc.what, err, transport.ErrPreconditionFailed)
		if msg := err.Error(); !strings.Contains(msg, q) || !strings.Contains(msg, tc.arg) {
			t.Errorf("redeclare with %s: %q names neither the queue nor %q", tc.what, msg, tc.arg)
		}
	}

	// The same declaration again is fine (an int of another width is the
	// same value), and the queue works.
	e.declare(c, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true, Args: map[string]any{"x-message-ttl": 60000}}}})
	e.send(c, q, "still works")
	e.ack(e.recvBody(e.consume(c, q, 1), "still works"))
}

// testDeclareStops: Declare applies in order and stops at the first
// refusal.
func testDeclareStops(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", map[string]any{"x-message-ttl": int64(60000)})
	after := e.name("after")
	err := c.Declare(e.ctx(), transport.Topology{Queues: []transport.Queue{
		{Name: q, Durable: true, Args: map[string]any{"x-message-ttl": int64(5000)}},
		{Name: after, Durable: true},
	}})
	e.wantErr("declare with an inequivalent queue first", err, transport.ErrPreconditionFailed)
	_, err = c.Inspect(e.ctx(), after)
	e.wantErr("Inspect of a queue after the refusal", err, transport.ErrNotFound)
}

// testInequivalentExchange: an exchange redeclared with another kind.
func testInequivalentExchange(t *testing.T, e *env) {
	c := e.conn()
	x := e.name("x")
	e.declare(c, transport.Topology{Exchanges: []transport.Exchange{{Name: x, Kind: "direct", Durable: true}}})
	err := c.Declare(e.ctx(), transport.Topology{Exchanges: []transport.Exchange{{Name: x, Kind: "fanout", Durable: true}}})
	e.wantErr("redeclare of a direct exchange as fanout", err, transport.ErrPreconditionFailed)
	e.declare(c, transport.Topology{Exchanges: []transport.Exchange{{Name: x, Kind: "direct", Durable: true}}})
}

// testBindMissing: binding to a missing queue or exchange is ErrNotFound.
func testBindMissing(t *testing.T, e *env) {
	c := e.conn()
	x := e.name("x")
	q := e.queue(c, "q", nil)
	e.declare(c, transport.Topology{Exchanges: []transport.Exchange{{Name: x, Kind: "direct", Durable: true}}})
	for _, bd := range []transport.Binding{
		{Queue: e.name("missing"), Exchange: x, Key: "k"},
		{Queue: q, Exchange: e.name("missing"), Key: "k"},
	} {
		err := c.Declare(e.ctx(), transport.Topology{Bindings: []transport.Binding{bd}})
		e.wantErr("bind "+bd.Queue+" to "+bd.Exchange, err, transport.ErrNotFound)
	}
	e.send(c, q, "fine")
}

// testInspect: a passive declare reports ready messages and consumers; a
// missing queue is ErrNotFound.
func testInspect(t *testing.T, e *env) {
	c := e.conn()
	_, err := c.Inspect(e.ctx(), e.name("missing"))
	e.wantErr("Inspect of a missing queue", err, transport.ErrNotFound)

	q := e.queue(c, "q", nil)
	for _, b := range []string{"1", "2", "3"} {
		e.send(c, q, b)
	}
	info, err := c.Inspect(e.ctx(), q)
	if err != nil || info.Name != q || info.Messages != 3 || info.Consumers != 0 {
		t.Fatalf("Inspect = %+v, %v; want %s with 3 messages, no consumer", info, err, q)
	}
	sub := e.consume(c, q, 1)
	d := e.recvBody(sub, "1")
	e.depth(c, q, 2) // the unacked one is not counted
	info, err = c.Inspect(e.ctx(), q)
	if err != nil || info.Consumers != 1 {
		t.Fatalf("Inspect with a consumer = %+v, %v; want 1 consumer", info, err)
	}
	e.ack(d)
}

// testConsumeMissing: Consume on a missing queue is ErrNotFound, and the
// transport goes on working.
func testConsumeMissing(t *testing.T, e *env) {
	c := e.conn()
	_, err := c.Consume(e.ctx(), e.name("missing"), transport.ConsumeOptions{})
	e.wantErr("Consume on a missing queue", err, transport.ErrNotFound)
	q := e.queue(c, "q", nil)
	e.send(c, q, "fine")
	e.ack(e.recvBody(e.consume(c, q, 0), "fine"))
}

// testClosed: after Close every call is ErrClosed and Close is idempotent.
func testClosed(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, err := c.Publish(e.ctx(), transport.Publishing{RoutingKey: q})
	e.wantErr("Publish after Close", err, transport.ErrClosed)
	_, err = c.Consume(e.ctx(), q, transport.ConsumeOptions{})
	e.wantErr("Consume after Close", err, transport.ErrClosed)
	_, _, err = c.Get(e.ctx(), q)
	e.wantErr("Get after Close", err, transport.ErrClosed)
	_, err = c.Inspect(e.ctx(), q)
	e.wantErr("Inspect after Close", err, transport.ErrClosed)
	e.wantErr("Declare after Close", c.Declare(e.ctx(), transport.Topology{}), transport.ErrClosed)
}
