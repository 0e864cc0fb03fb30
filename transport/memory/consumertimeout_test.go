package memory_test

import (
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
	"github.com/acemq/acemq/transport/transporttest"
)

// TestConsumerTimeoutConformance runs the suite's consumer-timeout case,
// which transport/amqp passes on a RabbitMQ node with a low
// consumer_timeout.
func TestConsumerTimeoutConformance(t *testing.T) {
	t.Parallel()
	const timeout = 30 * time.Second
	b := memory.New(memory.WithConsumerTimeout(timeout))
	t.Cleanup(func() { _ = b.Close() })
	transporttest.ConsumerTimeout(t, transporttest.Harness{ // one case, one tb: one broker
		New:     func(testing.TB) transport.Transport { return b.Connect() },
		Advance: func(_ testing.TB, d time.Duration) { b.Clock().Advance(d) },
	}, timeout)
}

// TestConsumerTimeoutTimesTheOldest: the timeout runs from each delivery's
// own time; acking the oldest moves the deadline to the next one, and a
// delivery acked in time never times out.
func TestConsumerTimeoutTimesTheOldest(t *testing.T) {
	f := setup(t, memory.WithConsumerTimeout(time.Minute))
	clock := f.b.Clock()
	f.queue("q", nil)
	f.send("q", "a")
	sub := f.consume("q", 2)
	a := f.recv(sub, "a")
	clock.Advance(40 * time.Second)
	f.send("q", "b")
	b := f.recv(sub, "b")
	clock.Advance(10 * time.Second)
	f.ack(a)
	clock.Advance(40 * time.Second) // a's deadline passed, but a was acked; b has 10s left
	f.none(sub)
	if n := f.b.Unacked("q"); n != 1 {
		t.Fatalf("%d unacked, want b alone", n)
	}
	clock.Advance(10 * time.Second)
	again := f.recv(sub, "b")
	if !again.Redelivered {
		t.Error("b is back, not marked redelivered")
	}
	wantErr(t, "Ack of b after its timeout", b.Ack(), transport.ErrStaleDelivery)
	if err := sub.Err(); err != nil {
		t.Fatalf("Err = %v, want nil: the subscription consumes again", err)
	}
	f.ack(again)
	clock.Advance(2 * time.Minute)
	f.none(sub)
	if n := f.b.Depth("q") + f.b.Unacked("q"); n != 0 {
		t.Fatalf("%d messages left, want none", n)
	}
}

// TestConsumerTimeoutClosesTheChannel: everything the subscription held
// goes back, not only the delivery that timed out, and what was buffered
// in Deliveries is dropped as stale: the subscription receives each of
// them once more, redelivered, from its new channel.
func TestConsumerTimeoutClosesTheChannel(t *testing.T) {
	f := setup(t, memory.WithConsumerTimeout(time.Minute))
	f.queue("q", nil)
	for _, body := range []string{"a", "b", "c"} {
		f.send("q", body)
	}
	slow := f.consume("q", 3)
	a := f.recv(slow, "a") // b and c wait in the buffer
	f.b.Clock().Advance(time.Minute)
	wantErr(t, "Ack of a after the timeout", a.Ack(), transport.ErrStaleDelivery)
	for _, body := range []string{"a", "b", "c"} {
		d := f.recv(slow, body)
		if !d.Redelivered {
			t.Errorf("%s not marked redelivered", body)
		}
		f.ack(d)
	}
	f.none(slow)
}

// TestConsumerTimeoutAfterCancel: deliveries held after Cancel are still
// on their channel, and still time out; the subscription does not come
// back.
func TestConsumerTimeoutAfterCancel(t *testing.T) {
	f := setup(t, memory.WithConsumerTimeout(time.Minute))
	f.queue("q", nil)
	f.send("q", "a")
	sub := f.consume("q", 1)
	a := f.recv(sub, "a")
	if err := sub.Cancel(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.b.Clock().Advance(time.Minute)
	wantErr(t, "Ack after the timeout", a.Ack(), transport.ErrStaleDelivery)
	if got := f.bodies("q"); len(got) != 1 || got[0] != "a" {
		t.Fatalf("queue holds %q, want a back", got)
	}
	if _, ok := <-sub.Deliveries(); ok {
		t.Fatal("a cancelled subscription consumed again")
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("Err = %v, want nil after Cancel", err)
	}
}

// TestNoConsumerTimeoutByDefault: without the option nothing is timed.
func TestNoConsumerTimeoutByDefault(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	f.send("q", "a")
	sub := f.consume("q", 1)
	a := f.recv(sub, "a")
	f.b.Clock().Advance(24 * time.Hour)
	f.none(sub)
	f.ack(a)
}

// TestDeleteQueueCancels: Broker.DeleteQueue and Conn.DeleteQueue cancel
// the queue's consumers with ErrCancelled, on every connection.
func TestDeleteQueueCancels(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	other := f.b.Connect()
	mine, theirs := f.consume("q", 1), consumeOn(t, other, "q")
	if !f.b.DeleteQueue("q") {
		t.Fatal("DeleteQueue: the queue did not exist")
	}
	for _, sub := range []transport.Subscription{mine, theirs} {
		if _, ok := <-sub.Deliveries(); ok {
			t.Fatal("Deliveries open after the queue's deletion")
		}
		if err := sub.Err(); !errors.Is(err, transport.ErrCancelled) {
			t.Fatalf("Err = %v, want ErrCancelled", err)
		}
	}
	if err := f.c.DeleteQueue(f.ctx, "q"); err != nil {
		t.Fatalf("Conn.DeleteQueue of a missing queue = %v, want nil", err)
	}
	_ = other.Close()
	wantErr(t, "DeleteQueue on a closed connection", other.DeleteQueue(f.ctx, "q"), transport.ErrClosed)
}

func consumeOn(t *testing.T, c *memory.Conn, queue string) transport.Subscription {
	t.Helper()
	s, err := c.Consume(t.Context(), queue, transport.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
