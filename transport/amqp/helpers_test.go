package rabbitmq

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// withRaw runs f on a plain amqp091-go channel to the test broker, for
// set-up and clean-up the transport does not offer.
func withRaw(tb testing.TB, f func(ch *amqp.Channel) error) error {
	tb.Helper()
	return brokertest.OnChannel(brokerURL(tb), f)
}

func deleteQueue(tb testing.TB, q string) {
	tb.Helper()
	if err := withRaw(tb, func(ch *amqp.Channel) error {
		_, err := ch.QueueDelete(q, false, false, false)
		return err
	}); err != nil {
		tb.Logf("delete queue %s: %v", q, err)
	}
}

// getOne polls queue with Get until a message comes (publishes are
// confirmed before they are visible to basic.get, but be patient).
func getOne(tb testing.TB, tr *Transport, queue string) transport.Delivery {
	tb.Helper()
	ctx := testCtx(tb, 10*time.Second)
	for {
		d, ok, err := tr.Get(ctx, queue)
		if err != nil {
			tb.Fatalf("Get %s: %v", queue, err)
		}
		if ok {
			return d
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("Get %s: no message", queue)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// receive reads one delivery from sub or fails the test after d.
func receive(tb testing.TB, sub transport.Subscription, d time.Duration) transport.Delivery {
	tb.Helper()
	select {
	case m, ok := <-sub.Deliveries():
		if !ok {
			tb.Fatal("Deliveries closed")
		}
		return m
	case <-time.After(d):
		tb.Fatalf("no delivery within %s", d)
	}
	panic("unreachable")
}

// rabbitmqctl runs the broker's CLI against node (empty: the node named by
// RABBITMQ_NODENAME, else rabbit@localhost).
func rabbitmqctl(tb testing.TB, node string, args ...string) string {
	tb.Helper()
	if node == "" {
		node = os.Getenv("RABBITMQ_NODENAME")
	}
	if node == "" {
		node = "rabbit@localhost"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", append([]string{"-n", node}, args...)...).CombinedOutput()
	if err != nil {
		tb.Fatalf("rabbitmqctl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

type rawChannel = *amqp.Channel
