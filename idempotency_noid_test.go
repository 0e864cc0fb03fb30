package acemq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/transport"
)

// TestIdempotentStampsAnIDOnAForeignMessage: a message from a foreign
// producer with neither x-acemq-id nor a message-id would get a fresh id on
// every delivery, and a redelivery would run its work twice. The idempotency
// middleware has the server publish it again with one id stamped on before
// any handler runs; every later delivery carries that id, so a redelivery
// is a duplicate.
func TestIdempotentStampsAnIDOnAForeignMessage(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []map[string]any
	h := &recorder{answer: func(m *acemq.Message) ack.Ack {
		if m.IDIsNew() {
			return ack.DeadLetter(errors.New("the handler ran on a made-up id"))
		}
		mu.Lock()
		seen = append(seen, m.Headers())
		mu.Unlock()
		return ack.Accept()
	}}
	mw, duplicates, _ := idemMiddleware(t, idempotency.NewMemory(time.Minute))
	f := start(t, &acemq.Server{}, map[string]acemq.Handler{"orders": mw(h)})
	foreign := transport.Publishing{RoutingKey: "orders", Body: []byte(`{"from":"elsewhere"}`)}
	if _, err := f.conn.Publish(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	f.eventually("handled once", func() bool { return h.count() == 1 && idemSettled(f, "orders") })
	f.counterReaches(acemq.MetricIDStamped, map[string]string{"queue": "orders"}, 1)
	if f.broker.Depth("orders.dlq") != 0 {
		t.Fatal("the handler ran on a made-up id")
	}
	// A redelivery carries what the handler saw: the stamped id.
	mu.Lock()
	again := transport.Publishing{RoutingKey: "orders", Headers: seen[0], Body: foreign.Body}
	mu.Unlock()
	if _, err := f.conn.Publish(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	f.eventually("the redelivery settled", func() bool { return idemSettled(f, "orders") && duplicates() == 1 })
	if h.count() != 1 {
		t.Errorf("the work ran %d times, want once", h.count())
	}
}
