package acemq_test

import (
	"context"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

var quorum = map[string]any{"x-queue-type": "quorum"}

// TestDeliveryLimitRefusesHalf: a limit is declared with its route or not
// at all, on a quorum queue, and never fights the queue's own arguments.
func TestDeliveryLimitRefusesHalf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		c    acemq.QueueConfig
		want string
	}{
		{"a limit in Args with no route", acemq.QueueConfig{Args: map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 5}},
			"x-delivery-limit 5 with no x-dead-letter-exchange: the broker would drop a message past the limit"},
		{"a limit on a classic queue", acemq.QueueConfig{DeliveryLimit: 5}, "DeliveryLimit needs a quorum queue (Args x-queue-type quorum); this one is classic"},
		{"negative", acemq.QueueConfig{DeliveryLimit: -1, Args: quorum}, "DeliveryLimit -1"},
		{"twice", acemq.QueueConfig{DeliveryLimit: 5, Args: map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 5, "x-dead-letter-exchange": "x"}}, "a DeliveryLimit and an x-delivery-limit in Args; set one"},
		{"a route of its own", acemq.QueueConfig{DeliveryLimit: 5, Args: map[string]any{"x-queue-type": "quorum", "x-dead-letter-exchange": "elsewhere"}},
			"DeliveryLimit declares x-dead-letter-exchange itself, and Args sets it to elsewhere"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			broker, conn := bare(t)
			srv := &acemq.Server{Transport: conn, Handler: acceptMux("orders"), Queues: map[string]acemq.QueueConfig{"orders": tt.c}}
			err := srv.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), `Server.Queues["orders"]: `+tt.want) {
				t.Errorf("Run = %v, want %q", err, tt.want)
			}
			if _, ok := broker.Queue("orders"); ok {
				t.Error("declared something before refusing")
			}
		})
	}
}

// TestDeliveryLimitDeclaredWithItsRoute: the limit goes on the queue with
// the route into .dlq, and a message the handler keeps giving back lands
// there once the broker's count passes it, not dropped.
func TestDeliveryLimitDeclaredWithItsRoute(t *testing.T) {
	t.Parallel()
	f := start(t, &acemq.Server{Retry: retry.Fixed(3, 0), Queues: map[string]acemq.QueueConfig{
		"orders": {DeliveryLimit: 3, Args: quorum},
	}}, map[string]acemq.Handler{"orders": always(ack.Requeue())})
	q, _ := f.broker.Queue("orders")
	for k, want := range map[string]any{"x-queue-type": "quorum", "x-delivery-limit": int64(3), "x-dead-letter-exchange": "acemq.dlx",
		"x-dead-letter-routing-key": "orders", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"} {
		if q.Args[k] != want {
			t.Errorf("declared %s = %#v, want %#v", k, q.Args[k], want)
		}
	}
	f.publish("orders", "{}", nil)
	d := f.only("orders.dlq")
	deaths, _ := d.Headers["x-death"].([]any)
	if len(deaths) == 0 {
		t.Fatalf("dead letter without x-death: %v", d.Headers)
	}
	if e, _ := deaths[0].(map[string]any); e["reason"] != "delivery_limit" || e["queue"] != "orders" {
		t.Errorf("x-death %v", deaths[0])
	}
}

// TestDeliveryLimitBelowTheAttempts: a limit below the policy's attempts
// is a warning at start-up, or an error when the queue asks for strictness.
func TestDeliveryLimitBelowTheAttempts(t *testing.T) {
	t.Parallel()
	pol := retry.Exponential(5, 1, 0)
	f := start(t, &acemq.Server{Retry: pol, Queues: map[string]acemq.QueueConfig{"orders": {DeliveryLimit: 2, Args: quorum}}},
		map[string]acemq.Handler{"orders": acceptMux("orders")})
	if n := f.logs.FilterMessageSnippet("below the 5 attempts its retry policy allows").Len(); n != 1 {
		t.Errorf("%d warnings about the limit, want 1", n)
	}

	broker := memory.New()
	defer broker.Close()
	conn := broker.Connect()
	defer conn.Close()
	srv := &acemq.Server{Transport: conn, Handler: acceptMux("orders"), Retry: pol,
		Queues: map[string]acemq.QueueConfig{"orders": {DeliveryLimit: 2, Args: quorum, StrictDeliveryLimit: true}}}
	if err := srv.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "delivery limit of 2, below the 5 attempts") {
		t.Errorf("strict Run = %v", err)
	}
}
