package acemq_test

import (
	"context"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// TestRabbitPubSubBindings: on RabbitMQ, a server declares its queue's
// topic and fanout bindings, and an amq.topic binding without declaring
// amq.topic (which RabbitMQ refuses); a typed event reaches the queue
// once per binding that matches.
func TestRabbitPubSubBindings(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	events, all := q+".events", q+".all"
	t.Cleanup(func() {
		_, _ = r.admin.QueueDelete(q, false, false, false)
		_ = r.admin.ExchangeDelete(events, false, false)
		_ = r.admin.ExchangeDelete(all, false, false)
	})
	h := &answers{acks: []ack.Ack{ack.Accept()}}
	r.serve(r.tr, q, &acemq.Server{Queues: map[string]acemq.QueueConfig{q: {Bindings: []acemq.Binding{
		{Exchange: events, Keys: []string{"payment.settled", "payment.refunded"}},
		{Exchange: all, Kind: "fanout"},
		{Exchange: "amq.topic", Keys: []string{q + ".#"}},
	}}}}, h)
	pub := &acemq.Publisher{Transport: r.tr, Mandatory: true}
	ctx := context.Background()
	for _, o := range []acemq.Outgoing{
		{Exchange: events, RoutingKey: "payment.settled"},
		{Exchange: all, RoutingKey: "whatever"},
		{Exchange: "amq.topic", RoutingKey: q + ".x"},
	} {
		if res, err := pub.PublishValue(ctx, o, paymentSettled{ID: "p-1"}); err != nil || !res.Routed {
			t.Errorf("publish %+v: %+v, %v", o, res, err)
		}
	}
	if _, err := pub.PublishValue(ctx, acemq.Outgoing{Exchange: events, RoutingKey: "payment.disputed"}, paymentSettled{}); err == nil {
		t.Error("a key no binding matches was routed")
	}
	r.eventually("three deliveries", func() bool { return len(h.deliveries()) == 3 })
	for _, e := range h.deliveries() {
		if e.ContentType != "application/json" {
			t.Errorf("content type %q", e.ContentType)
		}
	}
}
