package wire

import (
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// TestBoxCacheValues: whatever the order of values, each call gives its
// own value back, of its own type.
func TestBoxCacheValues(t *testing.T) {
	var c boxCache[string]
	for i := range 100 {
		want := []string{"orders", "orders", "invoices", "orders", ""}[i%5]
		if got, ok := c.get(want).(string); !ok || got != want {
			t.Fatalf("call %d: %#v, want %q", i, c.get(want), want)
		}
	}
	var n boxCache[int64]
	for i := range int64(100) {
		if got, ok := n.get(1717171717000 + i/3).(int64); !ok || got != 1717171717000+i/3 {
			t.Fatalf("call %d: %#v", i, got)
		}
	}
}

// TestNewRepeatedKeyAllocations: stamping messages to one routing key in
// one millisecond boxes neither again: the map, its slots and the id are
// all that New allocates.
func TestNewRepeatedKeyAllocations(t *testing.T) {
	now := time.UnixMilli(1717171717000)
	o := Origin{ID: "id-1", Created: now, Exchange: "events", RoutingKey: "order.placed"}
	New(o, nil, transport.Properties{}, nil)
	got := testing.AllocsPerRun(100, func() {
		p := New(Origin{ID: o.ID, Created: now, Exchange: o.Exchange, RoutingKey: o.RoutingKey}, nil, transport.Properties{}, nil)
		if p.Headers[RoutingKey] != "order.placed" || p.Headers[Created] != int64(1717171717000) || p.Headers[Exchange] != "events" {
			t.Fatalf("headers %v", p.Headers)
		}
	})
	if got > 3 {
		t.Errorf("%v allocations per New, want at most 3 (the map, its slots, the id's box)", got)
	}
}
