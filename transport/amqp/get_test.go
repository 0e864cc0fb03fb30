package rabbitmq

import (
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// TestGetOnAMissingQueueKeepsOtherHeldDeliveries: a 404 on one queue's Get
// closes that channel only; a delivery held from another queue can still be
// settled, as a replay holding skipped messages needs.
func TestGetOnAMissingQueueKeepsOtherHeldDeliveries(t *testing.T) {
	t.Parallel()
	tr := dial(t)
	ctx := testCtx(t, 20*time.Second)
	q := name(t, "q")
	if err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: false}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Publish(ctx, transport.Publishing{RoutingKey: q, Body: []byte("held")}); err != nil {
		t.Fatal(err)
	}
	held, ok, err := tr.Get(ctx, q)
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	if _, _, err := tr.Get(ctx, name(t, "missing")); !errors.Is(err, transport.ErrNotFound) {
		t.Fatalf("Get on a missing queue = %v, want ErrNotFound", err)
	}
	if err := held.Reject(true); err != nil {
		t.Fatalf("the held delivery died with the other queue's channel: %v", err)
	}
	again, ok, err := tr.Get(ctx, q)
	if err != nil || !ok || string(again.Body) != "held" || !again.Redelivered {
		t.Fatalf("after requeue: %v %v %+v", ok, err, again)
	}
	again.Ack()
}
