package rabbitmq_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
	"go.uber.org/zap"
)

// Dial once per process; the Transport reconnects by itself.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t, err := rabbitmq.Dial(ctx, "amqp://guest:guest@rabbit-1:5672/orders",
		rabbitmq.WithURLs("amqp://guest:guest@rabbit-2:5672/orders"),
		rabbitmq.WithConnectionName("orders-service"),
		rabbitmq.WithLogger(zap.NewExample()),
	)
	if err != nil {
		log.Fatal(err) // the password is redacted
	}
	defer t.Close()

	err = t.Declare(ctx, transport.Topology{
		Queues: []transport.Queue{{Name: "orders", Durable: true, Args: map[string]any{"x-queue-type": "quorum"}}},
	})
	if errors.Is(err, transport.ErrPreconditionFailed) {
		log.Fatal("orders exists with other arguments: ", err)
	}

	conf, err := t.Publish(ctx, transport.Publishing{
		RoutingKey: "orders",
		Mandatory:  true,
		Properties: transport.Properties{DeliveryMode: 2, ContentType: "application/json"},
		Body:       []byte(`{"id":1}`),
	})
	switch {
	case errors.Is(err, transport.ErrUnconfirmed):
		// Unknown outcome: publish again (a duplicate, never a loss).
	case err != nil:
		log.Fatal(err)
	case !conf.Routed:
		log.Print("no queue took the message")
	}
}

// Drain a subscription: cancel, settle what was already delivered, close.
func ExampleTransport_Consume() {
	ctx := context.Background()
	t, err := rabbitmq.Dial(ctx, "amqp://guest:guest@localhost:5672/")
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	sub, err := t.Consume(ctx, "orders", transport.ConsumeOptions{Prefetch: 20})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		time.Sleep(time.Minute)
		_ = sub.Cancel(ctx) // Deliveries closes once the broker stopped
	}()
	for d := range sub.Deliveries() {
		if err := d.Ack(); errors.Is(err, transport.ErrStaleDelivery) {
			continue // its channel died in a reconnect: the broker redelivers it
		}
	}
	_ = sub.Close()
}
