package rabbitmq

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
)

// TestProbationTwoConsumersInOrder: once the first fresh delivery ended
// the probation the subscription is two consumers on one channel (its tag
// at prefetch 1, tag.rest at the rest), whose deliveries come out of
// Deliveries in the order the broker sent them, each acked through the
// one ledger; a deleted queue cancels both, and the subscription ends
// with ErrCancelled as with one.
func TestProbationTwoConsumersInOrder(t *testing.T) {
	t.Parallel()
	tr := dial(t)
	q := declareQueue(t, tr, "probation", map[string]any{"x-queue-type": "quorum"})
	ctx := testCtx(t, 60*time.Second)
	const n = 300
	publishN(t, tr, q, 0, n)
	sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{Prefetch: 8, Tag: "probation-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	held := []transport.Delivery{}
	for i := range n {
		d := receive(t, sub, 10*time.Second)
		if got := string(d.Body); got != strconv.Itoa(i) {
			t.Fatalf("delivery %d is %q: out of the queue's order", i, got)
		}
		if i == 3 {
			waitInspect(t, tr, q, func(info transport.QueueInfo) bool { return info.Consumers == 2 })
		}
		// Settle out of order, a few held at a time, so that acks of
		// both consumers' deliveries share multiple-acks.
		held = append(held, d)
		if len(held) == 4 {
			for _, j := range []int{2, 0, 3, 1} {
				if err := held[j].Ack(); err != nil {
					t.Fatalf("Ack: %v", err)
				}
			}
			held = held[:0]
		}
	}
	for _, d := range held {
		if err := d.Ack(); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
	// Close would give back whatever was not acked: nothing comes back.
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	waitInspect(t, tr, q, func(info transport.QueueInfo) bool { return info.Messages == 0 && info.Consumers == 0 })

	// A deleted queue cancels both consumers.
	q2 := declareQueue(t, tr, "probation-deleted", map[string]any{"x-queue-type": "quorum"})
	publishN(t, tr, q2, 0, 3)
	sub2, err := tr.Consume(ctx, q2, transport.ConsumeOptions{Prefetch: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub2.Close() })
	for range 3 {
		receive(t, sub2, 10*time.Second)
	}
	waitInspect(t, tr, q2, func(info transport.QueueInfo) bool { return info.Consumers == 2 })
	if err := tr.DeleteQueue(ctx, q2); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-sub2.Deliveries():
		if ok {
			t.Fatal("a delivery after the queue was deleted")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Deliveries stayed open after the queue was deleted")
	}
	if err := sub2.Err(); !errors.Is(err, transport.ErrCancelled) {
		t.Errorf("Err = %v, want ErrCancelled", err)
	}
}

// waitInspect polls queue until ok holds, failing with what Inspect said
// last.
func waitInspect(tb testing.TB, tr *Transport, queue string, ok func(transport.QueueInfo) bool) {
	tb.Helper()
	var info transport.QueueInfo
	var err error
	if !polltest.Until(polltest.Generous, func() bool {
		info, err = tr.Inspect(testCtx(tb, 5*time.Second), queue)
		return err == nil && ok(info)
	}) {
		tb.Fatalf("Inspect %s = %+v, %v", queue, info, err)
	}
}
