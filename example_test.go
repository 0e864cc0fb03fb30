package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

func ExampleMux() {
	mux := acemq.NewMux()
	mux.HandleFunc("orders", func(ctx context.Context, m *acemq.Message) ack.Ack {
		fmt.Printf("order %s, attempt %d\n", m.Body(), m.Attempt())
		return ack.Accept()
	})
	a := mux.ServeMessage(context.Background(), acemq.NewMessage("orders", []byte(`{"id":7}`), nil))
	fmt.Println(a)
	fmt.Println(mux.ServeMessage(context.Background(), acemq.NewMessage("invoices", nil, nil)))
	// Output:
	// order {"id":7}, attempt 1
	// accept
	// dead-letter: the handler rejected it: acemq: no handler for queue "invoices"
}

func ExampleDecoded() {
	type Order struct {
		ID int `json:"id"`
	}
	h := acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, o Order) ack.Ack {
		fmt.Println("order", o.ID)
		return ack.Accept()
	})
	h.ServeMessage(context.Background(), acemq.NewMessage("orders", []byte(`{"id":7}`), nil))
	fmt.Println(h.ServeMessage(context.Background(), acemq.NewMessage("orders", []byte(`<order/>`), nil)).Outcome())
	// Output:
	// order 7
	// park
}

// ExampleServer runs a five-minute ladder in milliseconds: the memory
// transport's virtual clock moves only when the test says so, and the
// server's in-process waits and the rung queues' TTLs move with it.
func ExampleServer() {
	broker := memory.New()
	defer broker.Close()
	conn := broker.Connect()
	defer conn.Close()

	attempts := make(chan int, 10)
	mux := acemq.NewMux()
	mux.HandleFunc("shipping.orders", func(ctx context.Context, m *acemq.Message) ack.Ack {
		attempts <- m.Attempt()
		return ack.Retry(errors.New("the warehouse is not answering"))
	})
	policy := retry.Exponential(4, 30*time.Second, 0).WithJitter(0) // 30s 1m 2m, all on rungs
	srv := &acemq.Server{Transport: conn, Handler: mux, Retry: policy}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	<-srv.Ready() // declared and subscribed

	pub := &acemq.Publisher{Transport: conn, Mandatory: true}
	pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "shipping.orders", Body: []byte(`{"id":1}`)})
	for _, step := range policy.Schedule() {
		wait := step.Delay
		fmt.Println("attempt", <-attempts, "then wait", wait, "on", retry.RungName("shipping.orders", wait))
		waitFor(func() bool { return broker.Depth(retry.RungName("shipping.orders", wait)) == 1 })
		broker.Clock().Advance(wait)
	}
	fmt.Println("attempt", <-attempts)
	waitFor(func() bool { return broker.Depth("shipping.orders.dlq") == 1 })
	dead := broker.Peek("shipping.orders.dlq")[0]
	fmt.Println(dead.Headers[acemq.HeaderError])

	srv.Shutdown(context.Background())
	<-done
	// Output:
	// attempt 1 then wait 30s on shipping.orders.retry.30s
	// attempt 2 then wait 1m0s on shipping.orders.retry.1m
	// attempt 3 then wait 2m0s on shipping.orders.retry.2m
	// attempt 4
	// exhausted 4 attempts: the warehouse is not answering
}

func ExamplePublisher() {
	broker := memory.New()
	defer broker.Close()
	conn := broker.Connect()
	defer conn.Close()
	conn.Declare(context.Background(), acemq.Topology("orders", retry.None(), nil))

	pub := &acemq.Publisher{Transport: conn, Mandatory: true}
	res, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "orders", Body: []byte(`{"id":1}`), ID: "order-1"})
	fmt.Println(res.ID, res.Confirmed, res.Routed, err)
	_, err = pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "no-such-queue", Body: []byte(`{}`)})
	fmt.Println(errors.Is(err, acemq.ErrUnroutable))
	// Output:
	// order-1 true true <nil>
	// true
}

// waitFor polls cond: the server works on its own goroutines. An example
// has no testing.TB to fail: a condition that never holds shows in its
// output instead.
func waitFor(cond func() bool) { polltest.Until(polltest.Generous, cond) }
