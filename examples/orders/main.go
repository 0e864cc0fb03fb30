// Command orders is the main acemq example: an order service whose handler
// succeeds, fails for a while and recovers, fails for good, or is sent
// something that is not JSON, and what acemq does with each.
//
//	go run ./examples/orders                       # memory transport, no broker
//	go run ./examples/orders -amqp amqp://guest:guest@localhost:5672/
//
// It publishes six orders, prints every attempt and where each wait happened
// (in the process, or on a rung queue in the broker), then reads the reasons
// back from orders.dlq and orders.parked, and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
	"github.com/acemq/acemq/transport/memory"
)

const queue = "acemq.example.orders"

// Order is the message body.
type Order struct {
	ID       int    `json:"id"`
	Customer string `json:"customer"`
	// FailTimes makes the (pretend) warehouse fail this many times first.
	FailTimes int `json:"fail_times"`
}

// policy is a short ladder so the example runs in seconds: 100ms and 200ms
// waits in the process, 400ms and 800ms on rung queues in the broker.
var policy = retry.Exponential(5, 100*time.Millisecond, 0).WithBrokerWaitThreshold(400 * time.Millisecond)

func main() {
	url := flag.String("amqp", "", "RabbitMQ URL; empty runs on the in-process memory transport")
	flag.Parse()
	if err := run(os.Stdout, *url); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t, closeTransport, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer closeTransport()

	fmt.Fprintln(out, "ladder:")
	for i, step := range policy.Schedule() {
		fmt.Fprintf(out, "  after attempt %d wait %-6s %s\n", i+1, step.Delay, where(step.Delay))
	}

	var mu sync.Mutex
	accepted := 0
	mux := acemq.NewMux()
	mux.Use(middleware.Decode(codec.JSON), middleware.Recover())
	mux.Handle(queue, acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, o Order) ack.Ack {
		a := placeOrder(o, m.Attempt())
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "order %d attempt %d: %s\n", o.ID, m.Attempt(), describe(a, m.Attempt()))
		if a.Outcome() == ack.OutcomeAccept {
			accepted++
		}
		return a
	}))
	srv := &acemq.Server{Transport: t, Handler: mux, Retry: policy}
	if err := t.Declare(ctx, acemq.Topology(queue, policy, nil)); err != nil {
		return err
	}
	for _, q := range []string{queue, acemq.DeadLetterQueue(queue), acemq.ParkedQueue(queue)} {
		if err := drain(ctx, t, q, nil); err != nil { // leftovers of an earlier run
			return err
		}
	}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(ctx) }()

	pub := &acemq.Publisher{Transport: t, Mandatory: true}
	orders := []Order{
		{ID: 1, Customer: "ada"},
		{ID: 2, Customer: "grace", FailTimes: 2}, // recovers in the process
		{ID: 3, Customer: "linus", FailTimes: 3}, // recovers after a rung
		{ID: 4, Customer: "nobody"},              // no such customer: fatal
		{ID: 5, Customer: "ken", FailTimes: 99},  // never recovers
	}
	for _, o := range orders {
		body, _ := codec.JSON.Marshal(o)
		if _, err := pub.Publish(ctx, acemq.Outgoing{RoutingKey: queue, Body: body, ContentType: "application/json"}); err != nil {
			return err
		}
	}
	if _, err := pub.Publish(ctx, acemq.Outgoing{RoutingKey: queue, Body: []byte("<order id=6/>")}); err != nil {
		return err
	}

	// Wait until every order is settled: accepted, dead-lettered or parked.
	for {
		mu.Lock()
		done := accepted
		mu.Unlock()
		dlq, _ := t.Inspect(ctx, acemq.DeadLetterQueue(queue))
		parked, _ := t.Inspect(ctx, acemq.ParkedQueue(queue))
		if done+dlq.Messages+parked.Messages == 6 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not every order settled in time: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := srv.Shutdown(ctx); err != nil {
		return err
	}
	if err := <-runErr; err != nil {
		return err
	}
	for _, q := range []string{acemq.DeadLetterQueue(queue), acemq.ParkedQueue(queue)} {
		fmt.Fprintf(out, "%s:\n", q)
		err := drain(ctx, t, q, func(d transport.Delivery) {
			env := acemq.EnvelopeOf(d)
			fmt.Fprintf(out, "  %s (attempt %d): %s\n", d.Body, env.Attempt, env.Error)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

var errNoCustomer = errors.New("no such customer")

// placeOrder pretends to call a warehouse that fails o.FailTimes times.
func placeOrder(o Order, attempt int) ack.Ack {
	switch {
	case o.Customer == "nobody":
		return ack.Retry(ack.Fatal(fmt.Errorf("customer %q: %w", o.Customer, errNoCustomer)))
	case attempt <= o.FailTimes:
		return ack.Retry(errors.New("the warehouse is not answering"))
	}
	return ack.Accept()
}

// describe says what the server will do with a, from the policy's view.
func describe(a ack.Ack, attempt int) string {
	if a.Outcome() != ack.OutcomeRetry {
		return a.String()
	}
	if ack.IsFatal(a.Err()) {
		return "fatal: " + a.Err().Error() + " → dead letter"
	}
	if attempt >= policy.MaxAttempts() {
		return a.Err().Error() + " → no attempts left, dead letter"
	}
	return fmt.Sprintf("%s → retry after %s", a.Err(), where(policy.Schedule()[attempt-1].Delay))
}

func where(d time.Duration) string {
	if d >= policy.BrokerWaitThreshold() && policy.BrokerWaitThreshold() > 0 {
		return fmt.Sprintf("%s on rung %s", retry.FormatDelay(d), retry.RungName(queue, d))
	}
	return fmt.Sprintf("~%s in the process", retry.FormatDelay(d))
}

// drain takes every message from q, showing each to show (if any).
func drain(ctx context.Context, t transport.Transport, q string, show func(transport.Delivery)) error {
	for {
		d, ok, err := t.Get(ctx, q)
		if err != nil || !ok {
			return err
		}
		if show != nil {
			show(d)
		}
		if err := d.Ack(); err != nil {
			return err
		}
	}
}

// connect returns the memory transport (on wall time) or RabbitMQ.
func connect(ctx context.Context, url string) (transport.Transport, func(), error) {
	if url == "" {
		b := memory.New(memory.WithRealClock())
		c := b.Connect()
		return c, func() { c.Close(); b.Close() }, nil
	}
	t, err := rabbitmq.Dial(ctx, url, rabbitmq.WithConnectionName("acemq-example-orders"))
	if err != nil {
		return nil, nil, err
	}
	return t, func() { t.Close() }, nil
}
