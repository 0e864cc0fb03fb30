package memory_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// Advancing the virtual clock releases a message waiting on a retry rung
// back to its queue, the way RabbitMQ dead-letters it home.
func Example() {
	b := memory.New()
	conn := b.Connect()
	defer conn.Close()
	ctx := context.Background()

	err := conn.Declare(ctx, transport.Topology{
		Exchanges: []transport.Exchange{{Name: "acemq.retry", Kind: "direct", Durable: true}},
		Queues: []transport.Queue{
			{Name: "orders", Durable: true},
			{Name: "orders.retry.40s", Durable: true, Args: map[string]any{
				"x-message-ttl":             int64(40000),
				"x-dead-letter-exchange":    "acemq.retry",
				"x-dead-letter-routing-key": "orders",
			}},
		},
		Bindings: []transport.Binding{{Queue: "orders", Exchange: "acemq.retry", Key: "orders"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	sub, _ := conn.Consume(ctx, "orders", transport.ConsumeOptions{Prefetch: 1})
	_, _ = conn.Publish(ctx, transport.Publishing{RoutingKey: "orders.retry.40s", Body: []byte("order 42")})

	b.Clock().Advance(39 * time.Second)
	fmt.Println("after 39s, waiting on the rung:", b.Depth("orders.retry.40s"))
	b.Clock().Advance(time.Second)

	d := <-sub.Deliveries()
	death := d.Headers["x-death"].([]any)[0].(map[string]any)
	fmt.Printf("%s is back through %s with key %s (%s from %s)\n",
		d.Body, d.Exchange, d.RoutingKey, death["reason"], death["queue"])
	_ = d.Ack()
	// Output:
	// after 39s, waiting on the rung: 1
	// order 42 is back through acemq.retry with key orders (expired from orders.retry.40s)
}

// A test waits until the code under test sleeps on the clock, then moves
// time, with no real sleep.
func ExampleClock_BlockUntil() {
	clock := memory.NewClock(memory.Epoch)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-clock.After(time.Minute) // a retry's in-process wait, say
		fmt.Println("woke at", clock.Now().Format(time.TimeOnly))
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := clock.BlockUntil(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	clock.Advance(time.Minute)
	<-done
	// Output:
	// woke at 00:01:00
}

// A dead-letter queue that nacks twice and then takes the message: the
// broker-free way to test what a republish does when it is refused.
func ExampleFaultNext() {
	b := memory.New()
	conn := b.Connect()
	defer conn.Close()
	ctx := context.Background()
	if err := conn.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: "orders.dlq", Durable: true}}}); err != nil {
		fmt.Println(err)
		return
	}
	b.SetPublishFault(memory.FaultNext("orders.dlq", memory.Nack, memory.Nack))

	for range 3 {
		_, err := conn.Publish(ctx, transport.Publishing{RoutingKey: "orders.dlq", Body: []byte("order 42")})
		fmt.Printf("nacked %v, in the queue %d\n", errors.Is(err, transport.ErrNacked), b.Depth("orders.dlq"))
	}
	// Output:
	// nacked true, in the queue 0
	// nacked true, in the queue 0
	// nacked false, in the queue 1
}

// A queue under reject-publish nacks what would take it over its length
// limit.
func Example_rejectPublish() {
	b := memory.New()
	conn := b.Connect()
	defer conn.Close()
	ctx := context.Background()
	err := conn.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: "orders", Durable: true,
		Args: map[string]any{"x-max-length": 1, "x-overflow": "reject-publish"}}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, body := range []string{"order 1", "order 2"} {
		_, err := conn.Publish(ctx, transport.Publishing{RoutingKey: "orders", Body: []byte(body)})
		fmt.Println(body, "nacked:", errors.Is(err, transport.ErrNacked))
	}
	// Output:
	// order 1 nacked: false
	// order 2 nacked: true
}
