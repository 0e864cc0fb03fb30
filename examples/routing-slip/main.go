// Command routing-slip fulfils orders as routing slips: each order is a
// message that carries its own itinerary, stock.reserve → card.charge →
// shipping.ship, with the compensations (stock.release, card.refund) that
// undo the first two when shipping fails for good.
//
//	go run ./examples/routing-slip                      # memory transport, no broker
//	go run ./examples/routing-slip -amqp "$ACEMQ_AMQP_URL"
//
// It starts three slips: one completes, one is retried at card.charge (the
// payment provider times out once) and completes, one fails for good at
// shipping (no courier serves its address) and is compensated in reverse,
// refund then release. Then it starts the first again with the same id:
// its first hop is delivered twice, and the idempotency middleware runs
// the step once. It reads the completed and faulted events from
// orders.slips and prints each slip's story, and exits.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/slip"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
	"github.com/acemq/acemq/transport/memory"
)

// policy is every stop's ladder: three attempts, 200 ms apart, in the
// process.
var policy = retry.Fixed(3, 200*time.Millisecond)

// Orders are the example's three orders, one slip each.
var Orders = []Order{
	{ID: "order-1", Customer: "ada", Item: "espresso beans", Cents: 1250, Card: "4242 4242 4242 4242", Address: "London"},
	{ID: "order-2", Customer: "grace", Item: "teapot", Cents: 3400, Card: FlakyCard, Address: "Paris"},
	{ID: "order-3", Customer: "linus", Item: "mug", Cents: 900, Card: "5555 5555 5555 4444", Address: "Longyearbyen"},
}

func main() {
	url := flag.String("amqp", "", "RabbitMQ URL; empty runs on the in-process memory transport")
	flag.Parse()
	if _, err := run(os.Stdout, *url); err != nil {
		fmt.Fprintln(os.Stderr, "routing-slip:", err)
		os.Exit(1)
	}
}

// run is the whole example; it returns what happened, for its test.
func run(out io.Writer, url string) (*Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t, closeTransport, err := connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer closeTransport()
	if err := prepare(ctx, t); err != nil {
		return nil, err
	}

	shop := NewShop()
	courier := &slip.Courier{Publisher: &acemq.Publisher{Transport: t}}
	srv := &acemq.Server{Transport: t, Handler: shop.Mux(courier, idempotency.NewMemory(time.Hour)), Retry: policy}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-runErr:
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = srv.Shutdown(context.Background())
			<-runErr
		}
	}()

	for _, o := range Orders {
		if err := start(ctx, courier, o); err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "started %s: %s\n", o.ID, strings.Join(Stops, " → "))
	}
	if err := waitFor(ctx, t, Events, len(Orders)); err != nil {
		return nil, err
	}
	// The same slip id again: its first hop, <id>.0, reaches stock.reserve a
	// second time, as after a starter that crashed before it knew its
	// publish was confirmed and started it again.
	if err := start(ctx, courier, Orders[0]); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "started %s again, with the same id: its hop %s.0 is delivered twice\n", Orders[0].ID, Orders[0].ID)
	select {
	case <-shop.dupFound:
	case <-ctx.Done():
		return nil, fmt.Errorf("the repeated hop was not seen as a duplicate: %w", ctx.Err())
	}

	stopped = true
	if err := srv.Shutdown(ctx); err != nil {
		return nil, err
	}
	if err := <-runErr; err != nil {
		return nil, err
	}
	res, err := collect(ctx, t, shop)
	if err != nil {
		return nil, err
	}
	res.print(out)
	return res, nil
}

// start starts the slip of order o; its id is the order's.
func start(ctx context.Context, c *slip.Courier, o Order) error {
	body, err := json.Marshal(o)
	if err != nil {
		return err
	}
	_, err = c.Start(ctx, slip.Itinerary{
		ID: o.ID, Name: "fulfil-order", Stops: Stops,
		Variables: map[string]any{"customer": o.Customer},
		Completed: slip.ToQueue(Events), Faulted: slip.ToQueue(Events),
	}, acemq.Outgoing{Body: body, ContentType: "application/json"})
	return err
}

// queues are every queue the example uses: each stop's and compensation's
// with its .dlq and .parked, and the events'.
func queues() []string {
	var qs []string
	for _, q := range append(append([]string(nil), Stops...), Release, Refund) {
		qs = append(qs, q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q))
	}
	return append(qs, Events)
}

// prepare declares the topology (the server would declare the stops' own;
// nothing consumes orders.slips, so it is declared here) and empties the
// queues of what an earlier run on the same broker left.
func prepare(ctx context.Context, t transport.Transport) error {
	top := transport.Topology{Queues: []transport.Queue{{Name: Events, Durable: true}}}
	for _, q := range append(append([]string(nil), Stops...), Release, Refund) {
		qt := acemq.Topology(q, policy, nil)
		top.Exchanges = append(top.Exchanges, qt.Exchanges...)
		top.Queues = append(top.Queues, qt.Queues...)
		top.Bindings = append(top.Bindings, qt.Bindings...)
	}
	if err := t.Declare(ctx, top); err != nil {
		return err
	}
	for _, q := range queues() {
		if err := drain(ctx, t, q, nil); err != nil {
			return err
		}
	}
	return nil
}

// waitFor waits until queue holds n messages.
func waitFor(ctx context.Context, t transport.Transport, queue string, n int) error {
	for {
		info, err := t.Inspect(ctx, queue)
		if err != nil {
			return err
		}
		if info.Messages >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s holds %d messages, not %d: %w", queue, info.Messages, n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// drain takes every message from q, showing each to show (if any).
func drain(ctx context.Context, t transport.Transport, q string, show func(transport.Delivery) error) error {
	for {
		d, ok, err := t.Get(ctx, q)
		if err != nil || !ok {
			return err
		}
		if show != nil {
			if err := show(d); err != nil {
				return errors.Join(err, d.Ack())
			}
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
	t, err := rabbitmq.Dial(ctx, url, rabbitmq.WithConnectionName("acemq-example-routing-slip"))
	if err != nil {
		return nil, nil, err
	}
	return t, func() { t.Close() }, nil
}
