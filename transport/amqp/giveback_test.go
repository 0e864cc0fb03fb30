package rabbitmq

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestAGiveBackIsANack: a delivery given back (Reject with requeue) goes
// as basic.nack, not basic.reject, which RabbitMQ 4.3 counts against a
// quorum queue's delivery limit; a reject without requeue stays
// basic.reject.
func TestAGiveBackIsANack(t *testing.T) {
	t.Parallel()
	b := newTagBroker(2)
	l := newAckLedger(b, 8)
	if err := l.reject(1, true); err != nil {
		t.Fatal(err)
	}
	if err := l.reject(2, false); err != nil {
		t.Fatal(err)
	}
	l.flush()
	if got, want := strings.Join(b.sentFrames(), "; "), "nack 1 requeue=true; reject 2 requeue=false"; got != want {
		t.Errorf("frames %q, want %q", got, want)
	}
}

// giveBacks is how many times each way gives the one message back.
const giveBacks = 10

// spentBudget is what the ways of giving a delivery back spend of a quorum
// queue's delivery budget, per RabbitMQ version: the x-delivery-count of a
// message after giveBacks of them. 3.10.8 is measured by
// TestGiveBackDeliveryBudget; the others are read from RabbitMQ's source
// and documentation (see giveBack).
func spentBudget(version string) map[string]int64 {
	major, minor := brokerMinor(version)
	if major > 4 || major == 4 && minor >= 3 {
		return map[string]int64{"basic.reject": giveBacks, "basic.nack": 0, "channel close": giveBacks}
	}
	return map[string]int64{"basic.reject": giveBacks, "basic.nack": giveBacks, "channel close": giveBacks}
}

func brokerMinor(version string) (major, minor int) {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) >= 2 {
		major, _ = strconv.Atoi(parts[0])
		minor, _ = strconv.Atoi(parts[1])
	}
	return major, minor
}

// TestGiveBackDeliveryBudget measures what each way of giving one message
// back ten times spends of a quorum queue's delivery budget (its
// x-delivery-count), by basic.reject, basic.nack and closing the channel
// (the consumer gone), holds the broker to what the documentation says of
// its version, and the transport's give-backs to the cheapest: a
// give-back must never spend budget where a nack would not.
//
// On RabbitMQ 3.10.8 every way spends one per give-back.
func TestGiveBackDeliveryBudget(t *testing.T) {
	t.Parallel()
	url := brokerURL(t)
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	version, _ := conn.Properties["version"].(string)
	tr := dial(t)

	// Each way gets its own queue with one message and gives it back ten
	// times; the eleventh delivery's x-delivery-count is what they spent.
	// counts returns the x-delivery-count of every delivery, the eleventh
	// acked.
	ways := []struct {
		name   string
		counts func(t *testing.T, q string) []int64
	}{
		{"basic.reject", rawWay(conn, func(d amqp.Delivery) error { return d.Reject(true) })},
		{"basic.nack", rawWay(conn, func(d amqp.Delivery) error { return d.Nack(false, true) })},
		{"channel close", func(t *testing.T, q string) []int64 {
			var counts []int64
			for i := 0; i <= giveBacks; i++ {
				ch, err := conn.Channel()
				if err != nil {
					t.Fatal(err)
				}
				d := rawNext(t, ch, q)
				counts = append(counts, count(d.Headers))
				if i == giveBacks {
					if err := d.Ack(false); err != nil {
						t.Fatal(err)
					}
				}
				if err := ch.Close(); err != nil {
					t.Fatal(err)
				}
			}
			return counts
		}},
		{"transport give-back", func(t *testing.T, q string) []int64 {
			sub, err := tr.Consume(testCtx(t, 30*time.Second), q, transport.ConsumeOptions{Prefetch: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			var counts []int64
			for i := 0; i <= giveBacks; i++ {
				d := receive(t, sub, 5*time.Second)
				counts = append(counts, count(d.Headers))
				settle(t, d, i < giveBacks)
			}
			return counts
		}},
		{"transport give-back of a Get", func(t *testing.T, q string) []int64 {
			var counts []int64
			for i := 0; i <= giveBacks; i++ {
				d := getOne(t, tr, q)
				counts = append(counts, count(d.Headers))
				settle(t, d, i < giveBacks)
			}
			return counts
		}},
		{"transport subscription close", func(t *testing.T, q string) []int64 {
			var counts []int64
			for i := 0; i <= giveBacks; i++ {
				sub, err := tr.Consume(testCtx(t, 30*time.Second), q, transport.ConsumeOptions{Prefetch: 1})
				if err != nil {
					t.Fatal(err)
				}
				d := receive(t, sub, 5*time.Second)
				counts = append(counts, count(d.Headers))
				if i == giveBacks {
					settle(t, d, false)
				}
				if err := sub.Close(); err != nil {
					t.Fatal(err)
				}
			}
			return counts
		}},
	}
	spent := map[string]int64{}
	for _, w := range ways {
		q := name(t, strings.ReplaceAll(w.name, " ", "-"))
		if err := withRaw(t, func(ch *amqp.Channel) error {
			if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
				return err
			}
			if err := ch.Confirm(false); err != nil {
				return err
			}
			conf, err := ch.PublishWithDeferredConfirmWithContext(testCtx(t, 10*time.Second), "", q, true, false, amqp.Publishing{Body: []byte("m")})
			if err != nil {
				return err
			}
			if !conf.Wait() {
				return fmt.Errorf("publish to %s nacked", q)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteQueue(t, q) })
		counts := w.counts(t, q)
		spent[w.name] = counts[len(counts)-1]
		t.Logf("RabbitMQ %s, %d give-backs by %s: x-delivery-count %v", version, giveBacks, w.name, counts)
		if counts[0] != 0 {
			t.Errorf("%s: the first delivery has x-delivery-count %d", w.name, counts[0])
		}
	}

	for way, want := range spentBudget(version) {
		if spent[way] != want {
			t.Errorf("RabbitMQ %s: %d give-backs by %s spent %d of the delivery budget; the documentation (giveBack, docs/operators.md) says %d",
				version, giveBacks, way, spent[way], want)
		}
	}
	cheapest := min(spent["basic.reject"], spent["basic.nack"])
	for _, way := range []string{"transport give-back", "transport give-back of a Get"} {
		if spent[way] > cheapest {
			t.Errorf("RabbitMQ %s: the transport's %s spent %d where the cheapest way spends %d", version, way, spent[way], cheapest)
		}
	}
	if spent["transport subscription close"] != spent["channel close"] {
		t.Errorf("closing a subscription spent %d, closing a channel %d", spent["transport subscription close"], spent["channel close"])
	}
}

// rawWay consumes queue on one amqp091-go channel and gives each delivery
// back with giveBack; the consumer stays, as a server's does.
func rawWay(conn *amqp.Connection, giveBack func(amqp.Delivery) error) func(t *testing.T, q string) []int64 {
	return func(t *testing.T, q string) []int64 {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		if err := ch.Qos(1, 0, false); err != nil {
			t.Fatal(err)
		}
		ds, err := ch.Consume(q, "", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		var counts []int64
		for i := 0; i <= giveBacks; i++ {
			var d amqp.Delivery
			select {
			case d = <-ds:
			case <-time.After(5 * time.Second):
				t.Fatalf("no delivery %d", i+1)
			}
			counts = append(counts, count(d.Headers))
			if i == giveBacks {
				err = d.Ack(false)
			} else {
				err = giveBack(d)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return counts
	}
}

// settle gives d back, or acks it.
func settle(t *testing.T, d transport.Delivery, giveBack bool) {
	t.Helper()
	var err error
	if giveBack {
		err = d.Reject(true)
	} else {
		err = d.Ack()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// rawNext consumes one delivery of q on ch.
func rawNext(t *testing.T, ch *amqp.Channel, q string) amqp.Delivery {
	t.Helper()
	if err := ch.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ds:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery")
	}
	return amqp.Delivery{}
}

// count is a delivery's x-delivery-count, 0 when absent (a first
// delivery carries none).
func count[H ~map[string]any](h H) int64 {
	n, _ := transport.Int64(h["x-delivery-count"])
	return n
}
