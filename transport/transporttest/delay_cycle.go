package transporttest

import (
	"testing"
	"time"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

func init() {
	cases = append(cases, testCase{"DelayStaleDeathDropped", testDelayStaleDeathDropped})
}

// testDelayStaleDeathDropped: a message published onto the delay levels
// with an x-death it did not earn there (headers passed on from a message
// that itself came through the levels) is dropped by the broker, as a
// dead-letter cycle, when its walk enters a level that x-death names; the
// publish was confirmed and routed all the same. The same message without
// the stale x-death arrives. This is why every publish path strips what the
// broker owns (internal/wire): the transports cannot tell.
func testDelayStaleDeathDropped(t *testing.T, e *env) {
	c := e.conn()
	l := e.layout(c)
	q := e.name("dest")
	e.declare(c, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true}}, Bindings: []transport.Binding{e.bindTo(l, q)}})
	const n = 3 // units: waits on level 1, then level 0
	stale := []any{map[string]any{
		"count": int64(1), "reason": "expired", "queue": l.level(0), "exchange": l.level(0),
		"routing-keys": []any{spell(1, q)}, "time": time.Unix(1700000000, 0),
	}}
	for _, m := range []struct {
		body    string
		headers map[string]any
	}{
		{"stale", map[string]any{"x-death": stale}},
		{"clean", nil},
	} {
		p := transport.Publishing{Exchange: l.level(topLevel(n)), RoutingKey: spell(n, q), Mandatory: true, Headers: m.headers, Body: []byte(m.body)}
		p.DeliveryMode = 2
		if !e.publish(c, p).Routed {
			t.Fatalf("%s: not routed", m.body)
		}
	}
	e.advance(n*delay.Unit + 100*time.Millisecond)
	sub := e.consume(c, q, 5)
	e.ack(e.recvBody(sub, "clean"))
	e.none(sub)
	e.depth(c, l.level(0), 0)
	e.depth(c, l.level(1), 0)
}
