// Command outbox shows the transactional outbox: an order service writes an
// order row and the order.placed message it owes in one PostgreSQL
// transaction, and a relay publishes the message once the transaction has
// committed. A transaction that rolls back owes nothing.
//
//	go run ./examples/outbox -postgres postgres://user:pass@localhost:5432/db
//	go run ./examples/outbox -postgres ... -amqp amqp://guest:guest@localhost:5672/
//
// -postgres defaults to $ACEMQ_POSTGRES_URL; without -amqp the messages go
// to the in-process memory transport. It creates its tables if they are
// missing (acemq_example_orders and acemq_example_outbox), places two
// orders and refuses a third, prints what the consumer received, and exits.
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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
	"github.com/acemq/acemq/transport/memory"
)

const (
	exchange = "acemq.example.outbox"
	queue    = "acemq.example.outbox.order.placed"
	key      = "order.placed"
)

const createOrders = `CREATE TABLE IF NOT EXISTS acemq_example_orders (
	id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	customer text   NOT NULL,
	item     text   NOT NULL,
	quantity int    NOT NULL
)`

// Order is what a customer asks for.
type Order struct {
	Customer string
	Item     string
	Quantity int
}

// Service places orders.
type Service struct {
	Pool   *pgxpool.Pool
	Outbox *outbox.Outbox
}

// PlaceOrder stores the order and the order.placed message in one
// transaction: both commit, or neither does. It returns the order's id and
// the message's x-acemq-id.
func (s *Service) PlaceOrder(ctx context.Context, o Order) (orderID int64, messageID string, err error) {
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx,
			"INSERT INTO acemq_example_orders (customer, item, quantity) VALUES ($1, $2, $3) RETURNING id",
			o.Customer, o.Item, o.Quantity).Scan(&orderID); err != nil {
			return err
		}
		// A rule checked after the insert, to show a rollback taking the
		// message with it.
		if o.Quantity <= 0 {
			return fmt.Errorf("quantity %d: it must be positive", o.Quantity)
		}
		body := fmt.Sprintf(`{"order_id":%d,"customer":%q,"item":%q,"quantity":%d}`, orderID, o.Customer, o.Item, o.Quantity)
		messageID, err = s.Outbox.Write(ctx, tx, outbox.Message{
			Exchange:    exchange,
			RoutingKey:  key,
			Body:        []byte(body),
			ContentType: "application/json",
			Headers:     map[string]any{"order-id": orderID},
		})
		return err
	})
	return orderID, messageID, err
}

func main() {
	pg := flag.String("postgres", os.Getenv("ACEMQ_POSTGRES_URL"), "PostgreSQL URL (default $ACEMQ_POSTGRES_URL)")
	amqpURL := flag.String("amqp", "", "RabbitMQ URL; empty runs on the in-process memory transport")
	flag.Parse()
	if err := run(os.Stdout, *pg, *amqpURL); err != nil {
		fmt.Fprintln(os.Stderr, "outbox:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, pgURL, amqpURL string) error {
	if pgURL == "" {
		return errors.New("no PostgreSQL: give -postgres or set ACEMQ_POSTGRES_URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		return fmt.Errorf("postgres: %w", err) // pgx redacts the password
	}
	defer pool.Close()
	ob, err := outbox.New(pool, outbox.WithTable("acemq_example_outbox"))
	if err != nil {
		return err
	}
	// In a real service these are migrations.
	if _, err := pool.Exec(ctx, createOrders+";\n"+ob.CreateTableSQL()); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	t, where, err := connect(ctx, amqpURL)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.Declare(ctx, transport.Topology{
		Exchanges: []transport.Exchange{{Name: exchange, Kind: "topic", Durable: true}},
		Queues:    []transport.Queue{{Name: queue, Durable: true}},
		Bindings:  []transport.Binding{{Queue: queue, Exchange: exchange, Key: key}},
	}); err != nil {
		return err
	}
	fmt.Fprintf(out, "relaying table %s to %s\n", ob.Table(), where)

	received := make(chan transport.Delivery)
	sub, err := t.Consume(ctx, queue, transport.ConsumeOptions{Prefetch: 16})
	if err != nil {
		return err
	}
	done := make(chan struct{})
	var consumer sync.WaitGroup
	consumer.Add(1)
	go func() {
		defer consumer.Done()
		for d := range sub.Deliveries() {
			_ = d.Ack()
			select {
			case received <- d:
			case <-done:
				return
			}
		}
	}()
	defer func() {
		close(done)
		_ = sub.Close()
		consumer.Wait()
	}()

	relay, err := outbox.NewRelay(ob, t)
	if err != nil {
		return err
	}
	// The relay runs for the life of the service.
	relayCtx, cancelRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(relayCtx) }()
	var relayErr error
	var once sync.Once
	stopRelay := func() error {
		once.Do(func() {
			cancelRelay()
			relayErr = <-relayDone
		})
		return relayErr
	}
	defer stopRelay()

	svc := &Service{Pool: pool, Outbox: ob}
	placed := map[string]int64{}
	for _, o := range []Order{
		{Customer: "ada", Item: "espresso beans", Quantity: 2},
		{Customer: "bob", Item: "nothing", Quantity: 0},
		{Customer: "cy", Item: "milk frother", Quantity: 1},
	} {
		orderID, messageID, err := svc.PlaceOrder(ctx, o)
		if err != nil {
			fmt.Fprintf(out, "order for %d × %s by %s rolled back (%v): no order row, no message\n", o.Quantity, o.Item, o.Customer, err)
			continue
		}
		placed[messageID] = orderID
		fmt.Fprintf(out, "order %d committed with message %s\n", orderID, messageID)
	}

	for len(placed) > 0 {
		select {
		case d := <-received:
			id, _ := d.Headers[acemq.HeaderID].(string)
			orderID, ours := placed[id]
			if !ours {
				continue // left in the queue by an earlier run
			}
			delete(placed, id)
			fmt.Fprintf(out, "received %s for order %d: %s (x-acemq-id %s, attempt %v)\n",
				d.RoutingKey, orderID, d.Body, id, d.Headers[acemq.HeaderAttempt])
		case <-ctx.Done():
			return fmt.Errorf("%d messages not received: %w", len(placed), ctx.Err())
		}
	}
	if err := stopRelay(); err != nil {
		return err
	}
	s, err := ob.Stats(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "outbox: %d messages pending\n", s.Pending)
	return nil
}

// connect dials RabbitMQ, or starts the in-process memory broker.
func connect(ctx context.Context, url string) (transport.Transport, string, error) {
	if url == "" {
		b := memory.New(memory.WithRealClock())
		return closeBoth{b.Connect(), b}, "the memory transport", nil
	}
	t, err := rabbitmq.Dial(ctx, url, rabbitmq.WithConnectionName("acemq example outbox"))
	if err != nil {
		return nil, "", err
	}
	return t, "RabbitMQ", nil
}

// closeBoth closes the memory broker with its connection.
type closeBoth struct {
	transport.Transport
	b *memory.Broker
}

func (c closeBoth) Close() error {
	err := c.Transport.Close()
	return errors.Join(err, c.b.Close())
}
