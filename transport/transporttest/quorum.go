package transporttest

import (
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// The quorum queue cases of issue 18: what counts against a delivery
// limit, and the at-least-once dead-letter route a spent message takes.
func init() {
	cases = append(cases,
		testCase{"QuorumGiveBacksCount", testQuorumGiveBacksCount},
		testCase{"QuorumDeliveryLimitAtLeastOnce", testQuorumDeliveryLimitAtLeastOnce},
		testCase{"QuorumDeliveryLimitKeepsOlderDeaths", testQuorumDeliveryLimitOlderDeaths},
	)
}

// quorumArgs are a quorum work queue's arguments with the broker's limit
// and its at-least-once route into dlx with key q.
func quorumArgs(limit int, dlx, q string) map[string]any {
	return map[string]any{
		"x-queue-type":              "quorum",
		"x-delivery-limit":          limit,
		"x-dead-letter-exchange":    dlx,
		"x-dead-letter-routing-key": q,
		"x-dead-letter-strategy":    "at-least-once",
		"x-overflow":                "reject-publish",
	}
}

// testQuorumGiveBacksCount: every way a delivery goes back to a quorum
// queue unacknowledged spends one of its delivery budget, as RabbitMQ
// 3.10.8 counts (measured there: basic.reject and basic.nack with
// requeue and a closed channel alike, ten times each): a give-back
// (Reject with requeue, which the amqp transport sends as basic.nack), a
// closed subscription, a closed connection, a give-back of a Get.
// x-delivery-count says how many so far; a first delivery carries none.
func testQuorumGiveBacksCount(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "quorum", map[string]any{"x-queue-type": "quorum"})
	e.send(c, q, "m")
	const n = 10
	var want int64
	check := func(how string, d transport.Delivery) {
		t.Helper()
		got, ok := asInt(d.Headers["x-delivery-count"])
		if want == 0 && ok || want > 0 && (!ok || got != want) {
			t.Fatalf("after %d give-backs (the last by %s): x-delivery-count %#v, want %d", want, how, d.Headers["x-delivery-count"], want)
		}
		if d.Redelivered != (want > 0) {
			t.Errorf("after %d give-backs: redelivered %v", want, d.Redelivered)
		}
	}

	sub := e.consume(c, q, 1)
	for i := range n {
		d := e.recvBody(sub, "m")
		check("a give-back", d)
		if i == n-1 {
			// Cancelled first, or the give-back would come straight back
			// to this consumer, and go back again with the close.
			if err := sub.Cancel(e.ctx()); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			for range sub.Deliveries() {
			}
		}
		e.reject(d, true)
		want++
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	e.depth(c, q, 1)
	for range n {
		sub := e.consume(c, q, 1)
		check("a give-back or a closed subscription", e.recvBody(sub, "m"))
		if err := sub.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		want++
	}
	other := e.conn()
	check("a closed subscription", e.recvBody(e.consume(other, q, 1), "m"))
	if err := other.Close(); err != nil {
		t.Fatalf("closing the connection: %v", err)
	}
	want++
	e.depth(c, q, 1)
	d, ok, err := c.Get(e.ctx(), q)
	if err != nil || !ok {
		t.Fatalf("Get: %v, %v", ok, err)
	}
	check("a closed connection", d)
	e.reject(d, true)
	want++
	d = e.recvBody(e.consume(c, q, 1), "m")
	check("a give-back of a Get", d)
	e.ack(d)
	e.depth(c, q, 0)
}

// testQuorumDeliveryLimitAtLeastOnce: a quorum queue declared with a
// delivery limit and an at-least-once route (x-dead-letter-strategy
// at-least-once, x-overflow reject-publish), as acemq declares one, takes
// a message that went back past its limit, by any mix of give-backs and
// closed subscriptions, out through its route, as RabbitMQ 3.10.8 does:
// delivered limit+1 times (the last with x-delivery-count = limit),
// then in the dead-letter queue by the route's exchange and key, not
// redelivered, its own headers kept, x-death's newest entry saying
// delivery_limit from the queue with the exchange and routing keys it was
// published with, x-first-death-* set, and no x-delivery-count (a new
// queue counts anew). It reads back with the broker's reason.
func testQuorumDeliveryLimitAtLeastOnce(t *testing.T, e *env) {
	c := e.conn()
	dlx, q, dlq, in := e.name("dlx"), e.name("work"), e.name("work.dlq"), e.name("in")
	const limit = 3
	e.declare(c, transport.Topology{
		Exchanges: []transport.Exchange{{Name: dlx, Kind: "direct", Durable: true}, {Name: in, Kind: "direct", Durable: true}},
		Queues: []transport.Queue{
			{Name: q, Durable: true, Args: quorumArgs(limit, dlx, q)},
			{Name: dlq, Durable: true},
		},
		Bindings: []transport.Binding{{Queue: dlq, Exchange: dlx, Key: q}, {Queue: q, Exchange: in, Key: "orders.placed"}},
	})
	p := transport.Publishing{Exchange: in, RoutingKey: "orders.placed", Mandatory: true, Body: []byte("poison"),
		Headers: map[string]any{"x-mine": "kept"}}
	p.DeliveryMode = 2
	if !e.publish(c, p).Routed {
		t.Fatal("not routed")
	}

	sub := e.consume(c, q, 1)
	for i := int64(0); i <= limit; i++ {
		d := e.recvBody(sub, "poison")
		if n, ok := asInt(d.Headers["x-delivery-count"]); i == 0 && ok || i > 0 && n != i {
			t.Fatalf("delivery %d: x-delivery-count %#v, want %d", i+1, d.Headers["x-delivery-count"], i)
		}
		if i == 1 { // one of them by a closed subscription
			if err := sub.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			sub = e.consume(c, q, 1)
			continue
		}
		e.reject(d, true)
	}
	e.none(sub)
	e.depth(c, q, 0)

	dead := e.recvBody(e.consume(c, dlq, 1), "poison")
	if dead.Exchange != dlx || dead.RoutingKey != q || dead.Redelivered {
		t.Errorf("dead letter exchange %q key %q redelivered %v; want %q, %q, false", dead.Exchange, dead.RoutingKey, dead.Redelivered, dlx, q)
	}
	e.wantString(dead.Headers, "x-mine", "kept")
	e.wantDeath(dead.Headers, "delivery_limit", q, in, "orders.placed")
	if n, ok := dead.Headers["x-delivery-count"]; ok {
		t.Errorf("the dead letter carries x-delivery-count %#v", n)
	}
	if deaths, _ := dead.Headers["x-death"].([]any); len(deaths) != 1 {
		t.Errorf("x-death = %#v, want one entry", dead.Headers["x-death"])
	}
	reason := wire.Read(dead).Error
	if want := "the broker dead-lettered it from queue " + q + ": it reached the queue's delivery limit"; !strings.HasPrefix(reason, want) {
		t.Errorf("the dead letter reads back with the reason %q, want it to start %q", reason, want)
	}
	e.ack(dead)
	e.depth(c, dlq, 0)
}

// testQuorumDeliveryLimitOlderDeaths: a message that had died before (it
// came back from a rung) and then spends its delivery limit keeps its
// older x-death entries behind the new one, in RabbitMQ 3.10.8's order
// (checked there: two older entries come out reversed), and gets no
// x-first-death-* (only a first death writes them).
func testQuorumDeliveryLimitOlderDeaths(t *testing.T, e *env) {
	c := e.conn()
	dlx, q, dlq := e.name("dlx"), e.name("work"), e.name("work.dlq")
	e.declare(c, transport.Topology{
		Exchanges: []transport.Exchange{{Name: dlx, Kind: "direct", Durable: true}},
		Queues: []transport.Queue{
			{Name: q, Durable: true, Args: quorumArgs(0, dlx, q)},
			{Name: dlq, Durable: true},
		},
		Bindings: []transport.Binding{{Queue: dlq, Exchange: dlx, Key: q}},
	})
	older := func(queue string) map[string]any {
		return map[string]any{"count": int64(1), "reason": "expired", "queue": queue, "exchange": "",
			"routing-keys": []any{queue}, "time": time.Unix(1700000000, 0).UTC()}
	}
	p := transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("m"),
		Headers: map[string]any{"x-death": []any{older(q + ".retry.40s"), older(q + ".retry.1m20s")}}}
	p.DeliveryMode = 2
	if !e.publish(c, p).Routed {
		t.Fatal("not routed")
	}
	d := e.recvBody(e.consume(c, q, 1), "m")
	if reason := wire.Read(d).Error; reason != "" {
		t.Errorf("a message back from a rung reads with the reason %q", reason)
	}
	e.reject(d, true) // a limit of 0: the first give-back spends it

	dead := e.recvBody(e.consume(c, dlq, 1), "m")
	deaths, _ := dead.Headers["x-death"].([]any)
	var queues []string
	for _, x := range deaths {
		m, _ := x.(map[string]any)
		s, _ := m["queue"].(string)
		queues = append(queues, s)
	}
	if want := []string{q, q + ".retry.1m20s", q + ".retry.40s"}; strings.Join(queues, " ") != strings.Join(want, " ") {
		t.Errorf("x-death queues %q, want %q", queues, want)
	}
	if first, _ := deaths[0].(map[string]any); first["reason"] != "delivery_limit" {
		t.Errorf("x-death[0] = %#v, want the delivery limit's", deaths[0])
	}
	for _, h := range []string{"x-first-death-reason", "x-first-death-queue", "x-first-death-exchange"} {
		if v, ok := dead.Headers[h]; ok {
			t.Errorf("%s = %#v on a message that had died before", h, v)
		}
	}
	if reason := wire.Read(dead).Error; !strings.HasPrefix(reason, "the broker dead-lettered it from queue "+q+": it reached") {
		t.Errorf("the dead letter reads back with the reason %q", reason)
	}
	e.ack(dead)
}
