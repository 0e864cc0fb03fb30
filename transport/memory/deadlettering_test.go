package memory_test

import (
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// TestDeadLetteringCounted: a quorum queue that dead-letters at least once
// keeps what expires while its dead-letter exchange is missing, counted
// by DeadLettering and by neither Depth nor Unacked (RabbitMQ's
// messages_dlx), and places it once the exchange is back, at the next
// offer 3 minutes on.
func TestDeadLetteringCounted(t *testing.T) {
	f := setup(t)
	f.queue("level", map[string]any{
		"x-queue-type": "quorum", "x-message-ttl": int64(100), "x-dead-letter-exchange": "next",
		"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
	})
	f.send("level", "a")
	f.send("level", "b")
	f.b.Clock().Advance(time.Second)
	if got := f.b.DeadLettering("level"); got != 2 || f.b.Depth("level") != 0 || f.b.Unacked("level") != 0 {
		t.Fatalf("dead-lettering %d, ready %d, unacked %d; want 2, 0, 0", got, f.b.Depth("level"), f.b.Unacked("level"))
	}
	f.declare(transport.Topology{
		Exchanges: []transport.Exchange{{Name: "next", Kind: "fanout", Durable: true}},
		Queues:    []transport.Queue{{Name: "to", Durable: true}},
		Bindings:  []transport.Binding{{Queue: "to", Exchange: "next"}},
	})
	f.b.Clock().Advance(3 * time.Minute)
	if got := f.b.DeadLettering("level"); got != 0 || f.b.Depth("to") != 2 {
		t.Fatalf("after the next offer: dead-lettering %d, placed %d; want 0, 2", got, f.b.Depth("to"))
	}
	if f.b.DeadLettering("nosuch") != 0 {
		t.Error("a missing queue holds none")
	}
}
