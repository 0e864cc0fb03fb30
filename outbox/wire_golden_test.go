package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire/wiretest"
	"github.com/acemq/acemq/outbox"
)

// TestWireGoldenRelay checks every x-acemq-* header of what the relay
// publishes against docs/wire-contract.md, as the root package's
// TestWireGoldenEverySite does for the library's other publishers.
func TestWireGoldenRelay(t *testing.T) {
	doc := wiretest.Load(t, "../docs/wire-contract.md")
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		c := collect(t, f.tr, f.queue)
		stop := run(t, newRelay(t, f.o, f.tr))
		var before time.Time
		if err := f.pool.QueryRow(context.Background(), "SELECT now()").Scan(&before); err != nil {
			t.Fatal(err)
		}
		ids := write(t, f.pool, f.o, outbox.Message{Queue: f.queue, Body: []byte("{}"), Headers: map[string]any{"tenant": "acme"}})
		d := c.wait(t, 1, 10*time.Second)[0]
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		// The row's created_at is its transaction's start: not before ours
		// above, not after the delivery.
		created, _ := d.Headers[acemq.HeaderCreated].(int64)
		if created < before.UnixMilli() || created > time.Now().UnixMilli() {
			t.Errorf("x-acemq-created %d is not the row's creation time (after %d)", created, before.UnixMilli())
		}
		if err := doc.Check(d.Headers, wiretest.Want{ID: ids[0], Attempt: 1, Created: created, Exchange: "", RoutingKey: f.queue}); err != nil {
			t.Errorf("the relay's message:\n%v", err)
		}
	})
}
