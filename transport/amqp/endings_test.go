package rabbitmq

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/transporttest"
	amqp "github.com/rabbitmq/amqp091-go"
)

// nestedTable is a header table nested depth levels deep: RabbitMQ takes
// it, amqp091-go writes it, and amqp091-go's reader refuses it past 32.
func nestedTable(depth int) amqp.Table {
	top := amqp.Table{}
	cur := top
	for range depth {
		next := amqp.Table{}
		cur["n"] = next
		cur = next
	}
	return top
}

// TestUnreadableDeliveryIsolated: a delivery amqp091-go cannot read, at
// the head of one queue, costs no other queue of the same transport its
// channel or its acks, and the poisoned consumer's reconnects back off
// instead of coming every Backoff.Min.
func TestUnreadableDeliveryIsolated(t *testing.T) {
	t.Parallel()
	url, _ := freshVhost(t)
	tr := dialURL(t, url) // backoff 50ms to 1s: a dead-on-open loop alone would reconnect every ~40ms
	ctx := testCtx(t, 60*time.Second)
	poisoned, healthy := name(t, "poisoned"), name(t, "healthy")
	if err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: poisoned, Durable: true}, {Name: healthy, Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := brokertest.OnChannel(url, func(ch rawChannel) error {
		return ch.PublishWithContext(ctx, "", poisoned, false, false, amqp.Publishing{Headers: nestedTable(40), Body: []byte("poison")})
	}); err != nil {
		t.Fatalf("publish the poison: %v", err)
	}
	psub, err := tr.Consume(ctx, poisoned, transport.ConsumeOptions{Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}
	hsub, err := tr.Consume(ctx, healthy, transport.ConsumeOptions{Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}

	const n, every = 100, 40 * time.Millisecond // 4s of a healthy stream
	start := time.Now()
	published := make(chan error, 1)
	go func() {
		for i := range n {
			conf, err := tr.Publish(ctx, transport.Publishing{RoutingKey: healthy, Mandatory: true,
				Properties: transport.Properties{DeliveryMode: 2, MessageID: strconv.Itoa(i)}})
			if err == nil && !conf.Routed {
				err = fmt.Errorf("publish %d not routed", i)
			}
			if err != nil {
				published <- err
				return
			}
			time.Sleep(every)
		}
		published <- nil
	}()
	handled := map[int]int{}
	redelivered := 0
	for deadline := time.After(20 * time.Second); len(handled) < n || time.Since(start) < 5*time.Second; {
		select {
		case d, ok := <-hsub.Deliveries():
			if !ok {
				t.Fatalf("the healthy queue's Deliveries closed: %v", hsub.Err())
			}
			id, _ := strconv.Atoi(d.MessageID)
			handled[id]++
			if d.Redelivered {
				redelivered++
			}
			if err := d.Ack(); err != nil {
				t.Fatalf("Ack of healthy message %d: %v", id, err)
			}
		case d := <-psub.Deliveries():
			t.Fatalf("the poisoned queue delivered %q", d.Body)
		case <-deadline:
			t.Fatalf("%d of %d healthy messages handled in 20s", len(handled), n)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	for id, times := range handled {
		if times != 1 {
			t.Errorf("healthy message %d handled %d times", id, times)
		}
	}
	if redelivered > 0 {
		t.Errorf("%d healthy deliveries were redeliveries: the poison cost the healthy queue its channel", redelivered)
	}
	if g := hsub.(*subscription).conn.Generation(); g != 1 {
		t.Errorf("the healthy queue's connection was made %d times, want once", g)
	}
	conns := psub.(*subscription).conn.Generation()
	t.Logf("the poisoned consumer connected %d times in %s; Unreadable = %d", conns, elapsed.Round(time.Millisecond), tr.Unreadable(poisoned))
	if conns < 3 {
		t.Errorf("the poisoned consumer connected %d times: the poison never killed its connection?", conns)
	}
	// Every 25 to 50ms (Backoff.Min, jittered) would be over 100 in 5s.
	if limit := int(elapsed / (250 * time.Millisecond)); int(conns) > limit {
		t.Errorf("the poisoned consumer connected %d times in %s, over %d: its reconnects do not back off", conns, elapsed, limit)
	}
	if got := tr.Unreadable(poisoned); got < 2 || got > int(conns) {
		t.Errorf("Unreadable(%s) = %d, want 2..%d", poisoned, got, conns)
	}
	if got := tr.Unreadable(healthy); got != 0 {
		t.Errorf("Unreadable(%s) = %d, want 0", healthy, got)
	}
	if err := psub.Err(); err != nil {
		t.Errorf("the poisoned subscription ended: %v; it should go on trying", err)
	}
	for _, s := range []transport.Subscription{psub, hsub} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsumerTimeout runs the suite's consumer-timeout case on the
// private node with consumer_timeout at 1s, checked every 100ms. RabbitMQ
// 3.10.8 reads both settings when a channel opens, so only the channels
// this test opens get them, and the test puts the node's own back.
func TestConsumerTimeout(t *testing.T) {
	node := privateNode(t)
	node.Acquire(t)
	url, _ := node.FreshVhost(t)
	const timeout = time.Second
	setEnv := func(key, value string) {
		node.Ctl(t, "eval", fmt.Sprintf("application:set_env(rabbit, %s, %s).", key, value))
	}
	for key, value := range map[string]string{"consumer_timeout": strconv.Itoa(int(timeout.Milliseconds())), "channel_tick_interval": "100"} {
		was := strings.TrimSpace(node.Ctl(t, "eval", fmt.Sprintf("application:get_env(rabbit, %s).", key)))
		old, ok := strings.CutPrefix(strings.TrimSuffix(was, "}"), "{ok,")
		if !ok {
			t.Fatalf("%s on the private node: %q", key, was)
		}
		t.Cleanup(func() { setEnv(key, old) })
		setEnv(key, value)
	}
	transporttest.ConsumerTimeout(t, transporttest.Harness{
		New:     func(tb testing.TB) transport.Transport { return dialURL(tb, url) },
		Advance: func(_ testing.TB, d time.Duration) { time.Sleep(d) },
	}, timeout)
}

// TestVhostDeletedEndsSubscription: RabbitMQ 3.10.8 deleting a vhost
// cancels its consumers (basic.cancel), then closes its connections (320
// CONNECTION_FORCED); the subscription waits a moment after the cancel for
// that close, tries to reconnect, is refused (530), and ends with
// ErrNotFound naming the vhost, instead of redialling a vhost that is gone
// or blaming a deleted queue.
func TestVhostDeletedEndsSubscription(t *testing.T) {
	t.Parallel()
	url, vh := brokertest.FreshVhost(t, "", brokerURL(t)) // its clean-up tolerates the vhost gone
	q, sub := declareAndConsume(t, dialURL(t, url))
	rabbitmqctl(t, "", "delete_vhost", vh)
	awaitEnd(t, sub)
	if err := sub.Err(); !errors.Is(err, transport.ErrNotFound) || !strings.Contains(err.Error(), vh) || !strings.Contains(err.Error(), q) {
		t.Fatalf("Err = %v, want ErrNotFound naming the vhost %s and the queue %s", err, vh, q)
	}
}

// TestAccessWithdrawnEndsSubscription: with its read permission withdrawn
// a running consumer carries on (3.10.8 checks permissions at
// basic.consume), but once its connection is closed the broker refuses the
// reconnect (530 NOT_ALLOWED), and the subscription ends with
// ErrAccessRefused, whether it has a connection of its own or shares the
// transport's.
func TestAccessWithdrawnEndsSubscription(t *testing.T) {
	t.Parallel()
	for _, perConsumer := range []bool{true, false} {
		t.Run(fmt.Sprintf("perConsumer=%v", perConsumer), func(t *testing.T) {
			t.Parallel()
			url, vh := freshVhost(t)
			_, sub := declareAndConsume(t, dialURL(t, url, WithConnectionPerConsumer(perConsumer)))
			rabbitmqctl(t, "", "clear_permissions", "-p", vh, "guest")
			rabbitmqctl(t, "", "close_all_connections", "-p", vh, "acemq test: access withdrawn")
			awaitEnd(t, sub)
			err := sub.Err()
			if !errors.Is(err, transport.ErrAccessRefused) || !strings.Contains(err.Error(), "NOT_ALLOWED") {
				t.Fatalf("Err = %v, want ErrAccessRefused with the broker's NOT_ALLOWED", err)
			}
			start := time.Now()
			if err := sub.Close(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Close took %s", d)
			}
		})
	}
}

// declareAndConsume declares a durable queue and consumes it.
func declareAndConsume(tb testing.TB, tr *Transport) (string, transport.Subscription) {
	tb.Helper()
	ctx := testCtx(tb, 30*time.Second)
	q := name(tb, "q")
	if err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true}}}); err != nil {
		tb.Fatal(err)
	}
	sub, err := tr.Consume(ctx, q, transport.ConsumeOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return q, sub
}

// awaitEnd waits for sub's Deliveries to close on their own.
func awaitEnd(tb testing.TB, sub transport.Subscription) {
	tb.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case _, ok := <-sub.Deliveries():
			if !ok {
				return
			}
		case <-deadline:
			tb.Fatalf("Deliveries still open; Err = %v", sub.Err())
		}
	}
}
