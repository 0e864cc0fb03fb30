package transporttest

import (
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// wantDeath checks the newest x-death entry, as RabbitMQ 3.10 writes it,
// and the x-first-death-* headers of a first death.
func (e *env) wantDeath(h map[string]any, reason, queue, exchange string, keys ...string) {
	e.t.Helper()
	deaths, ok := h["x-death"].([]any)
	if !ok || len(deaths) == 0 {
		e.t.Fatalf("x-death = %#v, want an array of tables", h["x-death"])
	}
	d, ok := deaths[0].(map[string]any)
	if !ok {
		e.t.Fatalf("x-death[0] = %#v, want a map[string]any", deaths[0])
	}
	e.wantInt(d, "count", 1)
	e.wantString(d, "reason", reason)
	e.wantString(d, "queue", queue)
	e.wantString(d, "exchange", exchange)
	if _, ok := d["time"].(time.Time); !ok {
		e.t.Errorf("x-death time = %#v, want a time.Time", d["time"])
	}
	rks, ok := d["routing-keys"].([]any)
	if !ok || len(rks) != len(keys) {
		e.t.Fatalf("x-death routing-keys = %#v, want %q", d["routing-keys"], keys)
	}
	for i, k := range keys {
		if rks[i] != k {
			e.t.Errorf("x-death routing-keys = %#v, want %q", rks, keys)
		}
	}
	e.wantString(h, "x-first-death-reason", reason)
	e.wantString(h, "x-first-death-queue", queue)
	e.wantString(h, "x-first-death-exchange", exchange)
}

// testRejectDeadLetters: a reject without requeue goes through the queue's
// dead-letter exchange, keeping its routing key when the queue names none.
func testRejectDeadLetters(t *testing.T, e *env) {
	c := e.conn()
	dlx, q, dlq := e.name("dlx"), e.name("q"), e.name("q.dlq")
	e.declare(c, transport.Topology{
		Exchanges: []transport.Exchange{{Name: dlx, Kind: "direct", Durable: true}},
		Queues: []transport.Queue{
			{Name: q, Durable: true, Args: map[string]any{"x-dead-letter-exchange": dlx}},
			{Name: dlq, Durable: true},
		},
		Bindings: []transport.Binding{{Queue: dlq, Exchange: dlx, Key: q}},
	})
	e.publish(c, transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("bad"),
		Headers: map[string]any{"x-mine": "kept"}})

	e.reject(e.recvBody(e.consume(c, q, 1), "bad"), false)
	d := e.recvBody(e.consume(c, dlq, 1), "bad")
	if d.Exchange != dlx || d.RoutingKey != q || d.Redelivered {
		t.Errorf("dead letter exchange %q key %q redelivered %v; want %q, %q, false",
			d.Exchange, d.RoutingKey, d.Redelivered, dlx, q)
	}
	e.wantString(d.Headers, "x-mine", "kept")
	e.wantDeath(d.Headers, "rejected", q, "", q)
	e.ack(d)
	e.depth(c, q, 0)
}

// testTTLRung: the retry rung. Messages wait out the rung's TTL, then its
// dead-letter exchange and key take them home, in order, showing that
// exchange and key.
func testTTLRung(t *testing.T, e *env) {
	c := e.conn()
	home, src := e.name("retry"), e.name("orders")
	rung := src + ".retry.300ms"
	e.declare(c, transport.Topology{
		Exchanges: []transport.Exchange{{Name: home, Kind: "direct", Durable: true}},
		Queues: []transport.Queue{
			{Name: src, Durable: true},
			{Name: rung, Durable: true, Args: map[string]any{
				"x-message-ttl":             ttl.Milliseconds(),
				"x-dead-letter-exchange":    home,
				"x-dead-letter-routing-key": src,
			}},
		},
		Bindings: []transport.Binding{{Queue: src, Exchange: home, Key: src}},
	})
	sub := e.consume(c, src, 5)
	e.publish(c, transport.Publishing{RoutingKey: rung, Mandatory: true, Body: []byte("1"),
		Headers: map[string]any{"x-acemq-attempt": 2}})
	e.send(c, rung, "2")
	// Both wait on the rung (TTL is far longer than a publish).
	if info, err := c.Inspect(e.ctx(), rung); err != nil || info.Messages != 2 {
		t.Fatalf("rung right after publishing: %+v, %v; want 2 messages", info, err)
	}

	e.advance(ttl + 100*time.Millisecond)
	d := e.recvBody(sub, "1")
	if d.Exchange != home || d.RoutingKey != src || d.Redelivered {
		t.Errorf("expired message exchange %q key %q redelivered %v; want %q, %q, false",
			d.Exchange, d.RoutingKey, d.Redelivered, home, src)
	}
	e.wantInt(d.Headers, "x-acemq-attempt", 2)
	e.wantDeath(d.Headers, "expired", rung, "", rung)
	e.ack(d)
	e.ack(e.recvBody(sub, "2"))
	e.depth(c, rung, 0)
}

// testQuorumDeliveryLimit: a quorum queue counts deliveries given back
// (x-delivery-count on each redelivery) and dead-letters the message once
// the count passes x-delivery-limit.
func testQuorumDeliveryLimit(t *testing.T, e *env) {
	c := e.conn()
	q, dlq := e.limitedQuorum(c, 2)
	e.send(c, q, "poison")
	sub := e.consume(c, q, 1)

	d := e.recvBody(sub, "poison")
	if n, ok := asInt(d.Headers["x-delivery-count"]); ok && n != 0 {
		t.Errorf("first delivery x-delivery-count %d, want absent", n)
	}
	e.reject(d, true)
	for i := int64(1); i <= 2; i++ {
		d = e.recvBody(sub, "poison")
		if !d.Redelivered {
			t.Errorf("redelivery %d not marked redelivered", i)
		}
		e.wantInt(d.Headers, "x-delivery-count", i)
		e.reject(d, true)
	}
	e.none(sub)

	dead := e.recvBody(e.consume(c, dlq, 1), "poison")
	e.wantDeath(dead.Headers, "delivery_limit", q, "", q)
	e.ack(dead)
	e.depth(c, q, 0)
}

// testQuorumDeliveryLimitDrops: without a dead-letter exchange, a message
// past the limit is dropped.
func testQuorumDeliveryLimitDrops(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "quorum", map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 1})
	e.send(c, q, "poison")
	e.send(c, q, "fine")
	sub := e.consume(c, q, 1)

	e.reject(e.recvBody(sub, "poison"), true)
	d := e.recvBody(sub, "poison")
	e.wantInt(d.Headers, "x-delivery-count", 1)
	e.reject(d, true)
	e.ack(e.recvBody(sub, "fine"))
	e.none(sub)
	e.depth(c, q, 0)
}

// testXDeathCounts: a message dead-lettered from a, then b, then a again
// carries one x-death entry per queue and reason, newest first, counted;
// x-first-death-* keep the first death.
func testXDeathCounts(t *testing.T, e *env) {
	c := e.conn()
	a, b := e.name("a"), e.name("b")
	e.declare(c, transport.Topology{Queues: []transport.Queue{
		{Name: a, Durable: true, Args: map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": b}},
		{Name: b, Durable: true, Args: map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": a}},
	}})
	e.send(c, a, "m")
	sa, sb := e.consume(c, a, 1), e.consume(c, b, 1)
	e.reject(e.recvBody(sa, "m"), false)
	e.reject(e.recvBody(sb, "m"), false)
	e.reject(e.recvBody(sa, "m"), false)
	d := e.recvBody(sb, "m")

	deaths, _ := d.Headers["x-death"].([]any)
	if len(deaths) != 2 {
		t.Fatalf("x-death = %#v, want two entries", d.Headers["x-death"])
	}
	first, _ := deaths[0].(map[string]any)
	second, _ := deaths[1].(map[string]any)
	e.wantString(first, "queue", a)
	e.wantInt(first, "count", 2)
	e.wantString(second, "queue", b)
	e.wantInt(second, "count", 1)
	e.wantString(d.Headers, "x-first-death-queue", a)
	e.wantString(d.Headers, "x-first-death-reason", "rejected")
	e.ack(d)
}

// testDeadLetterCycleDropped: a message whose x-death already names the
// queue its rung leads back to, with no rejection since, is dropped when
// it expires (RabbitMQ's cycle detection); a rejection in between keeps it.
// This is why a republished copy must not carry x-death.
func testDeadLetterCycleDropped(t *testing.T, e *env) {
	c := e.conn()
	src := e.name("src")
	rung := src + ".retry"
	e.declare(c, transport.Topology{Queues: []transport.Queue{
		{Name: src, Durable: true},
		{Name: rung, Durable: true, Args: map[string]any{
			"x-message-ttl": ttl.Milliseconds(), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": src,
		}},
	}})
	death := func(reason string) map[string]any {
		return map[string]any{"x-death": []any{map[string]any{
			"count": int64(1), "reason": reason, "queue": src, "exchange": "",
			"routing-keys": []any{src}, "time": time.Unix(1700000000, 0),
		}}}
	}
	e.publish(c, transport.Publishing{RoutingKey: rung, Body: []byte("cycle"), Headers: death("expired")})
	e.publish(c, transport.Publishing{RoutingKey: rung, Body: []byte("kept"), Headers: death("rejected")})

	e.advance(ttl + 100*time.Millisecond)
	sub := e.consume(c, src, 5)
	e.ack(e.recvBody(sub, "kept"))
	e.none(sub)
	e.depth(c, rung, 0)
}

// limitedQuorum declares a quorum queue with x-delivery-limit limit whose
// dead letters go, through an exchange of its own, to a queue: the
// queue's name, and that of the queue its dead letters land in.
func (e *env) limitedQuorum(c transport.Transport, limit int) (q, dlq string) {
	e.t.Helper()
	dlx := e.name("dlx")
	q, dlq = e.name("quorum"), e.name("quorum.dlq")
	e.declare(c, transport.Topology{
		Exchanges: []transport.Exchange{{Name: dlx, Kind: "direct", Durable: true}},
		Queues: []transport.Queue{
			{Name: q, Durable: true, Args: map[string]any{
				"x-queue-type":           "quorum",
				"x-delivery-limit":       limit,
				"x-dead-letter-exchange": dlx,
			}},
			{Name: dlq, Durable: true},
		},
		Bindings: []transport.Binding{{Queue: dlq, Exchange: dlx, Key: q}},
	})
	return q, dlq
}
