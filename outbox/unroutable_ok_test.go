package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport"
)

// TestUnroutableOKForFanOutEvents: an event to a topic exchange nobody is
// bound to yet is counted and deleted, not kept for ever, once the relay is
// told that exchange's events may reach no queue; a command to a missing
// queue, and an event to an exchange not named, still stay.
func TestUnroutableOKForFanOutEvents(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		events, other := f.queue+".events", f.queue+".other"
		if err := f.tr.Declare(context.Background(), transport.Topology{Exchanges: []transport.Exchange{
			{Name: events, Kind: "topic", Durable: true}, {Name: other, Kind: "topic", Durable: true},
		}}); err != nil {
			t.Fatal(err)
		}
		mp, reader := metrictest.New(t)
		stop := run(t, newRelay(t, f.o, f.tr, fast, outbox.WithPollInterval(50*time.Millisecond),
			outbox.WithUnroutableOK(events), outbox.WithMeterProvider(mp)))
		ids := write(t, f.pool, f.o,
			outbox.Message{Exchange: events, RoutingKey: "payment.settled", Body: []byte("nobody listens yet")},
			outbox.Message{Queue: f.queue + ".missing", Body: []byte("a command")},
			outbox.Message{Exchange: other, RoutingKey: "x", Body: []byte("not named")},
		)
		polltest.Eventually(t, "the fan-out event deleted", func() bool {
			_, _, ok := f.attemptsOf(t, ids[0])
			return !ok
		})
		for _, id := range ids[1:] {
			polltest.Eventually(t, "the kept rows tried", func() bool {
				n, _, _ := f.attemptsOf(t, id)
				return n >= 1
			})
			if _, last, ok := f.attemptsOf(t, id); !ok || !strings.Contains(last, "reached no queue") {
				t.Errorf("row %s: present %v, last error %q; want it kept", id, ok, last)
			}
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		dropped := metrictest.Sum(t, reader, outbox.MetricUnroutable, map[string]string{"dropped": "true"})
		kept := metrictest.Sum(t, reader, outbox.MetricUnroutable, map[string]string{"dropped": "false"})
		if dropped != 1 || kept < 2 {
			t.Errorf("%s: dropped %d, kept %d; want 1 and at least 2", outbox.MetricUnroutable, dropped, kept)
		}
	})
}

func TestUnroutableOKRefusesTheDefaultExchange(t *testing.T) {
	t.Parallel()
	f := setup(t, brokers(t)[0])
	if _, err := outbox.NewRelay(f.o, f.tr, outbox.WithUnroutableOK("")); err == nil || !strings.Contains(err.Error(), "default exchange") {
		t.Errorf("NewRelay = %v", err)
	}
}
