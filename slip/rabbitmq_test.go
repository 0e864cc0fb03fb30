package slip_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/slip"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The slip tests again on a real RabbitMQ: the shop's queues named for the
// test, the ladder short (three attempts 200 ms apart, in the process).

func newRabbitShop(t *testing.T, wrap acemq.Middleware, queues ...string) *shop {
	t.Helper()
	return newRabbitShopWith(t, retry.Fixed(3, 200*time.Millisecond).WithJitter(0), wrap, queues...)
}

func newRabbitShopWith(t *testing.T, policy retry.Policy, wrap acemq.Middleware, queues ...string) *shop {
	t.Helper()
	url := brokertest.SharedURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr, err := rabbitmq.Dial(ctx, url, rabbitmq.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	s := &shop{t: t, fail: map[string][]ack.Ack{}, courier: &slip.Courier{Publisher: &acemq.Publisher{Transport: tr}},
		prefix: "it.slip." + hex.EncodeToString(b) + ".", tr: tr}
	var seen []transport.Delivery
	s.peek = func(queue string) []transport.Delivery { // takes what came, keeps what it took
		for {
			d, ok, err := tr.Get(context.Background(), queue)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return seen
			}
			_ = d.Ack()
			seen = append(seen, d)
		}
	}
	if err := tr.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: s.q("orders.slips"), Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	srv := &acemq.Server{Transport: tr, Handler: s.mux(wrap, queues...), Logger: zaptest.NewLogger(t),
		Retry: policy}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the server did not subscribe in 60s")
	}
	return s
}

// waitEvents waits until the events queue has given n events.
func (s *shop) waitEvents(n int) []event {
	s.t.Helper()
	var evs []event
	polltest.Eventually(s.t, "the slip's events", func() bool {
		evs = s.events()
		return len(evs) >= n
	})
	return evs
}

func (s *shop) depth(queue string) int {
	s.t.Helper()
	info, err := s.tr.Inspect(context.Background(), queue)
	if err != nil {
		s.t.Fatal(err)
	}
	return info.Messages
}

func prefixed(s *shop, names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, s.q(n))
	}
	return out
}

func TestRabbitMQSlip(t *testing.T) {
	t.Run("completes, a step retried on the way", func(t *testing.T) {
		s := newRabbitShop(t, nil)
		s.fail["card.charge"] = []ack.Ack{ack.Retry(errors.New("the payment provider is down"))}
		id := s.start("")
		evs := s.waitEvents(1)
		if evs[0].kind != slip.StateCompleted || evs[0].id != id+".completed" || !slices.Equal(visitedStops(evs[0].doc), prefixed(s, stops...)) {
			t.Fatalf("event %v %v, visited %v", evs[0].kind, evs[0].id, visitedStops(evs[0].doc))
		}
		if v := variable(t, evs[0].doc, "payment"); v != "p-r-"+id[:4] {
			t.Errorf("payment %v", v)
		}
		if got, want := s.ran(), []string{"stock.reserve", "card.charge failed", "card.charge", "shipping.ship"}; !slices.Equal(got, want) {
			t.Errorf("ran %v, want %v", got, want)
		}
	})
	t.Run("fails for good, compensated in reverse", func(t *testing.T) {
		s := newRabbitShop(t, nil)
		s.fail["shipping.ship"] = []ack.Ack{ack.Retry(ack.Fatal(errors.New("no courier serves the address")))}
		id := s.start("")
		evs := s.waitEvents(1)
		if evs[0].kind != slip.StateFaulted || evs[0].id != id+".faulted" {
			t.Fatalf("event %v %v", evs[0].kind, evs[0].id)
		}
		if got, want := s.ran(), []string{"stock.reserve", "card.charge", "shipping.ship failed", "card.refund", "stock.release"}; !slices.Equal(got, want) {
			t.Errorf("ran %v, want %v", got, want)
		}
		polltest.Eventually(t, "the stop's dead letter", func() bool { return s.depth(s.q("shipping.ship.dlq")) == 1 })
		d, ok, err := s.tr.Get(context.Background(), s.q("shipping.ship.dlq"))
		if err != nil || !ok {
			t.Fatalf("get the dead letter: %v %v", ok, err)
		}
		defer d.Ack()
		if doc, err := slip.Read(d.Headers); err != nil || doc.State != slip.StateCompensating || !strings.Contains(doc.Fault.Reason, "no courier") {
			t.Errorf("the dead letter's slip %+v, %v", doc, err)
		}
	})
	t.Run("the next stop missing: retried until it is there", func(t *testing.T) {
		// Attempts enough that the queue is declared before they are spent,
		// however busy the machine.
		s := newRabbitShopWith(t, retry.Fixed(100, 200*time.Millisecond).WithJitter(0), nil, "stock.reserve")
		s.start("")
		polltest.Eventually(t, "stock.reserve tried and refused onward", func() bool { return len(s.ran()) >= 1 })
		if err := s.tr.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: s.q("card.charge"), Durable: true}}}); err != nil {
			t.Fatal(err)
		}
		polltest.Eventually(t, "the slip at card.charge", func() bool { return s.depth(s.q("card.charge")) == 1 })
		if d := s.depth(s.q("stock.reserve.dlq")); d != 0 {
			t.Errorf("%d dead-lettered", d)
		}
	})
	t.Run("a hop delivered twice runs its step once", func(t *testing.T) {
		s := newRabbitShop(t, middleware.Idempotent(idempotency.NewMemory(time.Hour)))
		s.start("order-7")
		s.start("order-7")
		evs := s.waitEvents(1)
		if evs[0].id != "order-7.completed" {
			t.Fatalf("event %v", evs[0].id)
		}
		polltest.Eventually(t, "nothing left at the stops", func() bool {
			for _, q := range stops {
				if s.depth(s.q(q)) != 0 {
					return false
				}
			}
			return true
		})
		if got := s.ran(); !slices.Equal(got, stops) {
			t.Errorf("ran %v, want each stop once", got)
		}
		if n := len(s.events()); n != 1 {
			t.Errorf("%d events, want 1", n)
		}
	})
	t.Run("no stops: completed at once", func(t *testing.T) {
		s := newRabbitShop(t, nil)
		id, err := s.courier.Start(context.Background(), slip.Itinerary{Completed: slip.ToQueue(s.q("orders.slips"))}, acemq.Outgoing{Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		if evs := s.waitEvents(1); evs[0].kind != slip.StateCompleted || evs[0].id != id+".completed" || len(evs[0].doc.Visited) != 0 {
			t.Fatalf("event %v %v, visited %v", evs[0].kind, evs[0].id, evs[0].doc.Visited)
		}
	})
	t.Run("half-compensated, then replayed", func(t *testing.T) {
		s := newRabbitShop(t, nil)
		s.fail["shipping.ship"] = []ack.Ack{ack.Retry(ack.Fatal(errors.New("no courier")))}
		s.fail["card.refund"] = []ack.Ack{ack.Retry(ack.Fatal(errors.New("the card is closed")))}
		id := s.start("")
		evs := s.waitEvents(1)
		if evs[0].kind != slip.StateHalfCompensated || evs[0].id != id+".half-compensated" {
			t.Fatalf("event %v %v", evs[0].kind, evs[0].id)
		}
		polltest.Eventually(t, "the refund's dead letter", func() bool { return s.depth(s.q("card.refund.dlq")) == 1 })
		if _, err := acemq.Replay(context.Background(), s.tr, s.q("card.refund.dlq"), acemq.ReplayOptions{}); err != nil {
			t.Fatal(err)
		}
		evs = s.waitEvents(2)
		if evs[1].kind != slip.StateFaulted || len(evs[1].doc.Compensated) != 2 {
			t.Fatalf("after the replay: %v, compensated %v", evs[1].kind, evs[1].doc.Compensated)
		}
	})
}
