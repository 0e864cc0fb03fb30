package rabbitmq

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

func publishN(tb testing.TB, tr *Transport, queue string, from, to int) {
	tb.Helper()
	ctx := testCtx(tb, 30*time.Second)
	for i := from; i < to; i++ {
		conf, err := tr.Publish(ctx, transport.Publishing{
			RoutingKey: queue, Mandatory: true,
			Properties: transport.Properties{DeliveryMode: 2, MessageID: fmt.Sprint(i)},
			Body:       []byte(fmt.Sprint(i)),
		})
		if err != nil || !conf.Routed {
			tb.Fatalf("publish %d: %+v %v", i, conf, err)
		}
	}
}

func TestConsumeQuorumRedelivery(t *testing.T) {
	t.Parallel()
	tr := dial(t)
	q := declareQueue(t, tr, "quorum", map[string]any{"x-queue-type": "quorum"})
	ctx := testCtx(t, 20*time.Second)
	sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{Prefetch: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	publishN(t, tr, q, 0, 1)
	d := receive(t, sub, 5*time.Second)
	if d.Redelivered || d.Queue != q {
		t.Fatalf("first delivery: redelivered=%v queue=%q", d.Redelivered, d.Queue)
	}
	if err := d.Reject(true); err != nil {
		t.Fatal(err)
	}
	if err := d.Reject(true); !errors.Is(err, transport.ErrStaleDelivery) {
		t.Fatalf("second Reject = %v, want ErrStaleDelivery", err)
	}
	d = receive(t, sub, 5*time.Second)
	if !d.Redelivered {
		t.Error("requeued delivery not marked redelivered")
	}
	if got := d.Headers["x-delivery-count"]; got != int64(1) {
		t.Errorf("x-delivery-count = %#v, want int64(1)", got)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
}

// TestPreconditionKillsOnlyItsChannel: a refused declaration leaves a
// running subscription, publishing and other declarations untouched.
func TestPreconditionKillsOnlyItsChannel(t *testing.T) {
	t.Parallel()
	tr := dial(t)
	q := declareQueue(t, tr, "live", nil)
	other := declareQueue(t, tr, "other", map[string]any{"x-queue-type": "quorum"})
	ctx := testCtx(t, 20*time.Second)
	sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	publishN(t, tr, q, 0, 1)
	held := receive(t, sub, 5*time.Second)

	err = tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: other, Durable: true, Args: map[string]any{"x-queue-type": "classic"}}}})
	if !errors.Is(err, transport.ErrPreconditionFailed) {
		t.Fatalf("inequivalent redeclare = %v, want ErrPreconditionFailed", err)
	}
	if _, err := tr.Consume(ctx, name(t, "absent"), transport.ConsumeOptions{}); !errors.Is(err, transport.ErrNotFound) {
		t.Fatalf("Consume on a missing queue = %v, want ErrNotFound", err)
	}
	if _, err := tr.Inspect(ctx, name(t, "absent")); !errors.Is(err, transport.ErrNotFound) {
		t.Fatalf("Inspect on a missing queue = %v, want ErrNotFound", err)
	}
	if _, _, err := tr.Get(ctx, name(t, "absent")); !errors.Is(err, transport.ErrNotFound) {
		t.Fatalf("Get on a missing queue = %v, want ErrNotFound", err)
	}
	if err := held.Ack(); err != nil {
		t.Fatalf("a delivery from before the refusal: Ack = %v", err)
	}
	publishN(t, tr, q, 1, 2)
	if d := receive(t, sub, 5*time.Second); string(d.Body) != "1" {
		t.Fatalf("body %q", d.Body)
	} else if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: other, Durable: true, Args: map[string]any{"x-queue-type": "quorum"}}}}); err != nil {
		t.Fatalf("an equivalent redeclare after the refusal: %v", err)
	}
}

func TestCancelDrains(t *testing.T) {
	t.Parallel()
	tr := dial(t)
	q := declareQueue(t, tr, "drain", nil)
	ctx := testCtx(t, 20*time.Second)
	publishN(t, tr, q, 0, 20)
	sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{Prefetch: 5})
	if err != nil {
		t.Fatal(err)
	}
	first := receive(t, sub, 5*time.Second)
	if err := sub.Cancel(ctx); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	got := []transport.Delivery{first}
	for d := range sub.Deliveries() {
		got = append(got, d)
	}
	if len(got) == 0 || len(got) > 5 {
		t.Fatalf("drained %d deliveries, want 1..5 (the prefetch)", len(got))
	}
	for _, d := range got {
		if err := d.Ack(); err != nil {
			t.Fatalf("Ack after Cancel: %v", err)
		}
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Cancel(ctx); err != nil {
		t.Fatalf("Cancel after Close = %v", err)
	}
	info, err := tr.Inspect(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if info.Messages != 20-len(got) || info.Consumers != 0 {
		t.Fatalf("Inspect = %+v, want %d ready, 0 consumers", info, 20-len(got))
	}
}

func TestCloseRequeuesUnsettled(t *testing.T) {
	t.Parallel()
	tr := dial(t)
	q := declareQueue(t, tr, "requeue", nil)
	ctx := testCtx(t, 20*time.Second)
	publishN(t, tr, q, 0, 3)
	sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{Prefetch: 3})
	if err != nil {
		t.Fatal(err)
	}
	d := receive(t, sub, 5*time.Second)
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(); !errors.Is(err, transport.ErrStaleDelivery) {
		t.Fatalf("Ack after Close = %v, want ErrStaleDelivery", err)
	}
	if _, ok := <-sub.Deliveries(); ok {
		t.Fatal("Deliveries open after Close")
	}
	g := getOne(t, tr, q)
	if !g.Redelivered {
		t.Error("an unsettled delivery must come back redelivered")
	}
	if err := g.Reject(true); err != nil {
		t.Fatal(err)
	}
}

// TestCloseSendsWaitingAcks: acks waiting to share a multiple-ack are sent
// before the channel closes, whether the subscription or the whole
// transport is closed: an ack that returned nil is not redelivered after
// a clean close.
func TestCloseSendsWaitingAcks(t *testing.T) {
	t.Parallel()
	for _, closer := range []string{"subscription", "transport"} {
		t.Run(closer, func(t *testing.T) {
			t.Parallel()
			admin := dial(t)
			q := declareQueue(t, admin, "acks", nil)
			ctx := testCtx(t, 20*time.Second)
			publishN(t, admin, q, 0, 3)
			tr := dial(t)
			sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{Prefetch: 100})
			if err != nil {
				t.Fatal(err)
			}
			l := sub.(*subscription).ledger
			l.mu.Lock()
			l.linger = time.Hour // only the close can send them
			l.mu.Unlock()
			for range 3 {
				if err := receive(t, sub, 5*time.Second).Ack(); err != nil {
					t.Fatal(err)
				}
			}
			if closer == "subscription" {
				err = sub.Close()
			} else {
				err = tr.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			info, err := admin.Inspect(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if info.Messages != 0 {
				t.Fatalf("%d messages back in the queue after acking all and closing", info.Messages)
			}
		})
	}
}
