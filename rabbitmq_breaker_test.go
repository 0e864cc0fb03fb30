package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
)

// TestRabbitBreakerOutage: on RabbitMQ, at a small scale (seconds), a
// dependency down for 3 s under a steady arrival: the breaker opens, the
// orders wait in the broker, and once the dependency is back each is
// accepted exactly once; the .dlq holds only the orders that failed for
// their own reason (a fatal error) during the outage, dead-lettered at
// once as ever.
func TestRabbitBreakerOutage(t *testing.T) {
	r := newRabbit(t)
	q := r.queue()
	w := newWarehouse()
	w.down.Store(true)
	h := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		if string(m.Body()) == "bad-card" {
			return ack.Retry(ack.Fatal(errors.New("card closed")))
		}
		return w.ServeMessage(ctx, m)
	})
	r.serve(r.tr, q, &acemq.Server{
		Retry:  retry.Fixed(8, 200*time.Millisecond).WithJitter(0).WithBrokerWaitThreshold(time.Hour),
		Queues: map[string]acemq.QueueConfig{q: {Breaker: &acemq.Breaker{Window: 4, MinOutcomes: 4, CoolDown: 500 * time.Millisecond}}},
	}, h)
	const orders, bad = 30, 3
	began := time.Now()
	for i := range orders {
		r.publish(q, fmt.Sprintf("order-%02d", i))
		if i%10 == 5 {
			r.publish(q, "bad-card")
		}
		time.Sleep(100 * time.Millisecond) // the arrival rate: the outage is in real time here
	}
	r.eventually("the bad cards dead-lettered during the outage", func() bool { return r.depth(q+".dlq") == bad })
	w.down.Store(false)
	outage := time.Since(began)
	r.eventually("every order accepted", func() bool {
		all, _ := w.acceptedOnce(orders)
		return all && r.depth(q) == 0
	})
	if _, twice := w.acceptedOnce(orders); len(twice) > 0 {
		t.Errorf("accepted more than once: %v", twice)
	}
	if d := r.depth(q + ".dlq"); d != bad {
		t.Errorf("%s.dlq holds %d, want the %d bad cards alone", q, d, bad)
	}
	opened := r.counter(acemq.MetricBreaker, map[string]string{"queue": q, "state": "open"})
	t.Logf("an outage of %s: %d failed attempts, the breaker opened %d times", outage.Round(time.Millisecond), w.failures.Load(), opened)
	if opened < 1 {
		t.Error("the breaker never opened")
	}
}

// TestRabbitBreakerMarker: on RabbitMQ the open breaker's marker queue
// stands, exclusive to the server's connection (another connection is
// refused RESOURCE_LOCKED, which says it is there), and is deleted when
// the breaker closes.
func TestRabbitBreakerMarker(t *testing.T) {
	r := newRabbit(t)
	q := r.queue()
	srv := &acemq.Server{Queues: map[string]acemq.QueueConfig{q: {Breaker: &acemq.Breaker{CoolDown: time.Hour}}}}
	r.serve(r.tr, q, srv, acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() }))
	name := acemq.BreakerMarker(srv, q)
	conn, err := amqp.Dial(r.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// passive declares the marker on a channel of its own (a refusal
	// closes it) and returns the broker's reply code, 0 for none.
	passive := func() int {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		_, err = ch.QueueDeclarePassive(name, false, false, false, false, nil)
		var ae *amqp.Error
		if errors.As(err, &ae) {
			return ae.Code
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if code := passive(); code != amqp.NotFound {
		t.Fatalf("before the trip the marker answers %d, want 404", code)
	}
	if err := srv.TripBreaker(q, "the warehouse is down"); err != nil {
		t.Fatal(err)
	}
	r.eventually("the marker standing, another connection's exclusive queue", func() bool { return passive() == amqp.ResourceLocked })
	if err := srv.ResetBreaker(q, "back"); err != nil {
		t.Fatal(err)
	}
	r.eventually("the marker deleted", func() bool { return passive() == amqp.NotFound })
}
