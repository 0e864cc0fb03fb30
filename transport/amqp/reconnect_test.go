package rabbitmq

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
)

// These tests take connections or whole brokers away: they do not run in
// parallel with the others, and act only on a vhost or node of their own.

// consumeAll receives until every id in [0, n) was seen, acking each, and
// fails after d. Duplicates (redeliveries) are fine; a missing id is a loss.
func consumeAll(tb testing.TB, sub transport.Subscription, seen map[int]bool, n int, d time.Duration) {
	tb.Helper()
	deadline := time.After(d)
	for len(seen) < n {
		select {
		case m, ok := <-sub.Deliveries():
			if !ok {
				tb.Fatalf("Deliveries closed with %d of %d seen", len(seen), n)
			}
			id, err := strconv.Atoi(m.MessageID)
			if err != nil {
				tb.Fatalf("message id %q", m.MessageID)
			}
			if err := m.Ack(); err != nil && !errors.Is(err, transport.ErrStaleDelivery) {
				tb.Fatalf("Ack: %v", err)
			} else if err == nil {
				seen[id] = true
			}
		case <-deadline:
			tb.Fatalf("only %d of %d messages within %s", len(seen), n, d)
		}
	}
}

// awaitStale waits until d's channel is gone.
func awaitStale(tb testing.TB, d transport.Delivery) {
	tb.Helper()
	a := d.Acknowledger.(*acker)
	polltest.Within(tb, 10*time.Second, "the delivery's channel is closed", a.ch.IsClosed)
}

func TestReconnectAfterConnectionsClosed(t *testing.T) {
	url, vh := freshVhost(t)
	tr := dialURL(t, url)
	ctx := testCtx(t, 60*time.Second)
	q, gone := name(t, "q"), name(t, "gone")
	err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true}, {Name: gone, Durable: true}}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	publishN(t, tr, q, 0, n)
	sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{Prefetch: 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	seen := map[int]bool{}
	consumeAll(t, sub, seen, 50, 10*time.Second)
	held := receive(t, sub, 5*time.Second)
	// Delete a declared queue behind the transport's back: the reconnect
	// must declare it again.
	if err := brokertest.OnChannel(url, func(ch rawChannel) error { _, err := ch.QueueDelete(gone, false, false, false); return err }); err != nil {
		t.Fatal(err)
	}

	props := rabbitmqctl(t, "", "list_connections", "-p", vh, "client_properties")
	if !strings.Contains(props, "acemq-test "+t.Name()+" consume") || !strings.Contains(props, "acemq-test "+t.Name()+" publish") {
		t.Errorf("connection names not set:\n%s", props)
	}
	rabbitmqctl(t, "", "close_all_connections", "-p", vh, "acemq test: forced reconnect")
	awaitStale(t, held)
	if err := held.Ack(); !errors.Is(err, transport.ErrStaleDelivery) {
		t.Fatalf("Ack from before the reconnect = %v, want ErrStaleDelivery", err)
	}
	consumeAll(t, sub, seen, n, 30*time.Second)

	publishN(t, tr, q, n, n+10)
	consumeAll(t, sub, seen, n+10, 10*time.Second)
	if _, err := tr.Inspect(ctx, gone); err != nil {
		t.Fatalf("the declared queue was not declared again: %v", err)
	}
}

func TestBrokerRestartLosesNothing(t *testing.T) {
	node := privateNode(t)
	tr := dialURL(t, node.URL)
	ctx := testCtx(t, 120*time.Second)
	q := name(t, "q")
	if err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	const n = 300
	publishN(t, tr, q, 0, n)
	sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{Prefetch: 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	seen := map[int]bool{}
	consumeAll(t, sub, seen, 100, 10*time.Second)
	held := receive(t, sub, 5*time.Second)

	stopped := true
	rabbitmqctl(t, node.Name, "stop_app")
	t.Cleanup(func() {
		if stopped {
			rabbitmqctl(t, node.Name, "start_app")
		}
	})
	awaitStale(t, held)
	pctx := testCtx(t, 500*time.Millisecond)
	if _, err := tr.Publish(pctx, transport.Publishing{RoutingKey: q}); !errors.Is(err, transport.ErrUnconfirmed) {
		t.Errorf("Publish while the broker is down = %v, want ErrUnconfirmed", err)
	}
	rabbitmqctl(t, node.Name, "start_app")
	stopped = false
	if err := held.Ack(); !errors.Is(err, transport.ErrStaleDelivery) {
		t.Fatalf("Ack from before the restart = %v, want ErrStaleDelivery", err)
	}
	consumeAll(t, sub, seen, n, 60*time.Second)
	publishN(t, tr, q, n, n+10)
	consumeAll(t, sub, seen, n+10, 10*time.Second)
}

// TestFailoverToNextNode: with the first node down, the transport moves to
// the next URL, declares its topology there and resumes consuming.
func TestFailoverToNextNode(t *testing.T) {
	node := privateNode(t)
	url, _ := freshVhost(t)
	tr := dialURL(t, node.URL, WithURLs(url))
	ctx := testCtx(t, 120*time.Second)
	q := name(t, "q")
	if err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{Prefetch: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	publishN(t, tr, q, 0, 5)
	seen := map[int]bool{}
	consumeAll(t, sub, seen, 5, 10*time.Second)

	rabbitmqctl(t, node.Name, "stop_app")
	t.Cleanup(func() { rabbitmqctl(t, node.Name, "start_app") })
	// The second node knows nothing of q until the transport declares it.
	if !polltest.Until(90*time.Second, func() bool {
		var conf transport.Confirmation
		conf, err = tr.Publish(ctx, transport.Publishing{RoutingKey: q, Mandatory: true,
			Properties: transport.Properties{MessageID: "5"}})
		return err == nil && conf.Routed
	}) {
		t.Fatalf("never published on the next node: %v", err)
	}
	consumeAll(t, sub, seen, 6, 30*time.Second)
}

// TestCloseWhileReconnecting: Close does not wait for a broker that is
// down, and leaves no goroutine behind (goleak checks at the end).
func TestCloseWhileReconnecting(t *testing.T) {
	node := privateNode(t)
	ctx := testCtx(t, 60*time.Second)
	tr, err := Dial(ctx, node.URL, WithBackoff(50*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	q := name(t, "q")
	if err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: q}}}); err != nil {
		t.Fatal(err)
	}
	sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rabbitmqctl(t, node.Name, "stop_app")
	t.Cleanup(func() { rabbitmqctl(t, node.Name, "start_app") })
	for {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err := tr.consume.Connection(short)
		cancel()
		if err != nil {
			break // the connection is gone and the transport is redialling
		}
	}
	pending := make(chan error, 1)
	go func() {
		_, err := tr.Publish(ctx, transport.Publishing{RoutingKey: q})
		pending <- err
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %s while reconnecting", d)
	}
	if _, ok := <-sub.Deliveries(); ok {
		t.Fatal("Deliveries open after the transport closed")
	}
	if err := <-pending; !errors.Is(err, transport.ErrClosed) && !errors.Is(err, transport.ErrUnconfirmed) {
		t.Fatalf("a Publish waiting for the connection = %v, want ErrClosed or ErrUnconfirmed", err)
	}
}
