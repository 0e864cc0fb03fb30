package transporttest

import (
	"errors"
	"testing"

	"github.com/acemq/acemq/transport"
)

func init() {
	cases = append(cases, testCase{"InspectExchange", testInspectExchange})
}

// testInspectExchange: a transport that checks exchanges passively
// (transport.ExchangeInspector) says ErrNotFound for a missing one and nil
// for one that exists, and the refusal harms nothing after it (on
// RabbitMQ a passive declare of a missing exchange closes its channel).
func testInspectExchange(t *testing.T, e *env) {
	c := e.conn()
	xi, ok := c.(transport.ExchangeInspector)
	if !ok {
		t.Skip("the transport cannot check an exchange passively (no transport.ExchangeInspector)")
	}
	x := e.name("x")
	e.wantErr("InspectExchange of a missing exchange", xi.InspectExchange(e.ctx(), x), transport.ErrNotFound)
	q := e.queue(c, "q", nil)
	e.declare(c, transport.Topology{
		Exchanges: []transport.Exchange{{Name: x, Kind: "topic", Durable: true}},
		Bindings:  []transport.Binding{{Queue: q, Exchange: x, Key: "#"}},
	})
	for _, name := range []string{x, ""} {
		if err := xi.InspectExchange(e.ctx(), name); err != nil {
			t.Fatalf("InspectExchange(%q) of an exchange that exists: %v", name, err)
		}
	}
	if err := xi.InspectExchange(e.ctx(), e.name("gone")); !errors.Is(err, transport.ErrNotFound) {
		t.Fatalf("InspectExchange of a missing exchange again: %v", err)
	}
	if !e.publish(c, transport.Publishing{Exchange: x, RoutingKey: "k", Mandatory: true, Body: []byte("after")}).Routed {
		t.Fatal("a publish after a refused passive declare was not routed")
	}
	e.depth(c, q, 1)
}
