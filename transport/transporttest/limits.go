package transporttest

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/acemq/acemq/transport"
)

// nacked publishes body to queue, mandatory, and checks the broker nacked
// it.
func (e *env) nacked(c transport.Transport, queue, body string) {
	e.t.Helper()
	_, err := c.Publish(e.ctx(), transport.Publishing{RoutingKey: queue, Mandatory: true, Body: []byte(body)})
	e.wantErr(fmt.Sprintf("publish %q to the full queue %q", body, queue), err, transport.ErrNacked)
}

// queueWithDLQ declares the queue name with args, dead-lettering through
// the default exchange to name.dlq, and returns both names.
func (e *env) queueWithDLQ(c transport.Transport, name string, args map[string]any) (q, dlq string) {
	e.t.Helper()
	q, dlq = e.name(name), e.name(name+".dlq")
	all := map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
	maps.Copy(all, args)
	e.declare(c, transport.Topology{Queues: []transport.Queue{
		{Name: q, Durable: true, Args: all},
		{Name: dlq, Durable: true},
	}})
	return q, dlq
}

// testRejectPublish: a classic queue at its x-max-length under
// reject-publish nacks the next publish and keeps what it has; its unacked
// messages do not count, and consuming makes room again.
func testRejectPublish(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", map[string]any{"x-max-length": 2, "x-overflow": "reject-publish"})
	e.send(c, q, "a")
	e.send(c, q, "b")
	e.nacked(c, q, "c")
	e.depth(c, q, 2)

	sub := e.consume(c, q, 1)
	a := e.recvBody(sub, "a")
	e.depth(c, q, 1)
	e.send(c, q, "c") // one ready and one unacked: room for one
	e.nacked(c, q, "d")
	e.ack(a)
	e.ack(e.recvBody(sub, "b"))
	e.ack(e.recvBody(sub, "c"))
	e.depth(c, q, 0)
	e.send(c, q, "d")
	e.ack(e.recvBody(sub, "d"))
	e.none(sub)
}

// testRejectPublishZero: x-max-length 0 under reject-publish nacks every
// publish, even one a waiting consumer could take.
func testRejectPublishZero(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", map[string]any{"x-max-length": 0, "x-overflow": "reject-publish"})
	e.nacked(c, q, "a")
	sub := e.consume(c, q, 1)
	e.nacked(c, q, "b")
	e.none(sub)
	e.depth(c, q, 0)
}

// testRejectPublishOneOfSeveral: a message routed to a full queue and to
// another is nacked, and the other queue keeps its copy.
func testRejectPublishOneOfSeveral(t *testing.T, e *env) {
	c := e.conn()
	x, full, other := e.name("fan"), e.name("full"), e.name("other")
	e.declare(c, transport.Topology{
		Exchanges: []transport.Exchange{{Name: x, Kind: "fanout", Durable: true}},
		Queues: []transport.Queue{
			{Name: full, Durable: true, Args: map[string]any{"x-max-length": 0, "x-overflow": "reject-publish"}},
			{Name: other, Durable: true},
		},
		Bindings: []transport.Binding{{Queue: full, Exchange: x}, {Queue: other, Exchange: x}},
	})
	_, err := c.Publish(e.ctx(), transport.Publishing{Exchange: x, Mandatory: true, Body: []byte("m")})
	e.wantErr("publish to a full queue and another", err, transport.ErrNacked)
	e.ack(e.recvBody(e.consume(c, other, 1), "m"))
	e.depth(c, full, 0)
}

// testRejectPublishBytes: x-max-length-bytes counts the bodies of the
// ready messages; an empty one still fits.
func testRejectPublishBytes(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", map[string]any{"x-max-length-bytes": 5, "x-overflow": "reject-publish"})
	e.send(c, q, "abc")
	e.send(c, q, "de")
	e.nacked(c, q, "f")
	e.send(c, q, "")
	e.depth(c, q, 3)
}

// testRejectPublishDLX: reject-publish-dlx nacks the publish and
// dead-letters the message, reason maxlen.
func testRejectPublishDLX(t *testing.T, e *env) {
	c := e.conn()
	q, dlq := e.queueWithDLQ(c, "q", map[string]any{"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
	e.send(c, q, "a")
	e.nacked(c, q, "b")
	d := e.recvBody(e.consume(c, dlq, 1), "b")
	e.wantDeath(d.Headers, "maxlen", q, "", q)
	e.ack(d)
	e.depth(c, q, 1)
}

// testDropHead: under drop-head, the default, the oldest ready message
// makes room: dead-lettered with reason maxlen when the queue has a
// dead-letter exchange, dropped when it has none.
func testDropHead(t *testing.T, e *env) {
	c := e.conn()
	dlx, q, dlq, bare := e.name("dlx"), e.name("q"), e.name("q.dlq"), e.name("bare")
	e.declare(c, transport.Topology{
		Exchanges: []transport.Exchange{{Name: dlx, Kind: "direct", Durable: true}},
		Queues: []transport.Queue{
			{Name: q, Durable: true, Args: map[string]any{"x-max-length": 2, "x-dead-letter-exchange": dlx}},
			{Name: dlq, Durable: true},
			{Name: bare, Durable: true, Args: map[string]any{"x-max-length": 1}},
		},
		Bindings: []transport.Binding{{Queue: dlq, Exchange: dlx, Key: q}},
	})
	for _, b := range []string{"a", "b", "c"} {
		e.send(c, q, b) // confirmed: drop-head never nacks
	}
	d := e.recvBody(e.consume(c, dlq, 1), "a")
	if d.Exchange != dlx || d.RoutingKey != q {
		t.Errorf("dead letter exchange %q key %q, want %q, %q", d.Exchange, d.RoutingKey, dlx, q)
	}
	e.wantDeath(d.Headers, "maxlen", q, "", q)
	e.ack(d)
	e.depth(c, q, 2)
	sub := e.consume(c, q, 5)
	e.ack(e.recvBody(sub, "b"))
	e.ack(e.recvBody(sub, "c"))

	e.send(c, bare, "x")
	e.send(c, bare, "y")
	e.depth(c, bare, 1)
	e.ack(e.recvBody(e.consume(c, bare, 1), "y"))
}

// testDropHeadGivenBack: unacked messages do not count towards the limit,
// but one given back returns to the head of the queue, and from a full
// queue it is the one dropped.
func testDropHeadGivenBack(t *testing.T, e *env) {
	c := e.conn()
	q, dlq := e.queueWithDLQ(c, "q", map[string]any{"x-max-length": 2})
	e.send(c, q, "a")
	e.send(c, q, "b")
	sub := e.consume(c, q, 1)
	a := e.recvBody(sub, "a")
	e.depth(c, q, 1)
	e.send(c, q, "c")
	e.depth(c, q, 2)
	e.reject(a, true)
	dead := e.recvBody(e.consume(c, dlq, 1), "a")
	e.wantDeath(dead.Headers, "maxlen", q, "", q)
	e.ack(dead)
	e.ack(e.recvBody(sub, "b"))
	e.ack(e.recvBody(sub, "c"))
	e.none(sub)
}

// testQuorumRejectPublish: a quorum queue under reject-publish takes the
// publish that goes over its limit and nacks the next ones; consuming one
// leaves it over 80% of its limit and still refusing; below that it takes
// publishes again.
func testQuorumRejectPublish(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "quorum", map[string]any{"x-queue-type": "quorum", "x-max-length": 2, "x-overflow": "reject-publish"})
	for _, b := range []string{"a", "b", "c"} {
		e.send(c, q, b)
	}
	e.nacked(c, q, "d")
	e.depth(c, q, 3)

	sub := e.consume(c, q, 1)
	a := e.recvBody(sub, "a")
	e.depth(c, q, 2)
	e.nacked(c, q, "d")
	e.ack(a)
	b := e.recvBody(sub, "b")
	e.depth(c, q, 1)
	// RabbitMQ tells the publishing channel to go on asynchronously.
	e.eventually(func() (bool, string) {
		_, err := c.Publish(e.ctx(), transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("d")})
		return err == nil, fmt.Sprintf("publish with 1 of 2 ready: %v", err)
	})
	e.ack(b)
	e.ack(e.recvBody(sub, "c"))
	e.ack(e.recvBody(sub, "d"))
	e.none(sub)
}

// testLimitArgsRefused: bad limit arguments are PRECONDITION_FAILED, in
// RabbitMQ's words, and the transport goes on working.
func testLimitArgsRefused(t *testing.T, e *env) {
	c := e.conn()
	for i, tc := range []struct {
		args map[string]any
		arg  string
		why  string
	}{
		{map[string]any{"x-max-length": -1}, "x-max-length", "{value_negative,-1}"},
		{map[string]any{"x-max-length": "5"}, "x-max-length", `"expected integer, got longstr"`},
		{map[string]any{"x-max-length-bytes": -1}, "x-max-length-bytes", "{value_negative,-1}"},
		{map[string]any{"x-overflow": "drop-tail"}, "x-overflow", "invalid_overflow"},
		{map[string]any{"x-overflow": 1}, "x-overflow", "{unacceptable_type,signedint}"},
	} {
		q := e.name(fmt.Sprint("bad", i))
		err := c.Declare(e.ctx(), transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true, Args: tc.args}}})
		e.wantErr(fmt.Sprintf("declare with %v", tc.args), err, transport.ErrPreconditionFailed)
		if msg := err.Error(); !strings.Contains(msg, "invalid arg '"+tc.arg+"' for queue '"+q+"'") || !strings.Contains(msg, tc.why) {
			t.Errorf("declare with %v: %q, want invalid arg '%s' for queue '%s' ... %s", tc.args, msg, tc.arg, q, tc.why)
		}
		_, err = c.Inspect(e.ctx(), q)
		e.wantErr("Inspect of a refused queue", err, transport.ErrNotFound)
	}
	q := e.queue(c, "fine", map[string]any{"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
	e.send(c, q, "fine")
}
