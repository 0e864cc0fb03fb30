package outbox_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/acemq/acemq/outbox"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// A service writes its order and the message it owes in one transaction;
// a relay, running for the life of the process, publishes the message once
// the transaction has committed. (It needs a database and a broker, so it
// is compiled but not run.)
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("ACEMQ_POSTGRES_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	ob, err := outbox.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	// In a migration:
	if _, err := pool.Exec(ctx, ob.CreateTableSQL()); err != nil {
		log.Fatal(err)
	}

	t, err := rabbitmq.Dial(ctx, os.Getenv("ACEMQ_AMQP_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	relay, err := outbox.NewRelay(ob, t, outbox.WithLogger(zap.NewExample()))
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		if err := relay.Run(ctx); err != nil {
			log.Fatal(err) // the table is missing, or the transport closed
		}
	}()

	// In the request handler: both commit, or neither does.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var orderID int64
		if err := tx.QueryRow(ctx, "INSERT INTO orders (customer) VALUES ($1) RETURNING id", "ada").Scan(&orderID); err != nil {
			return err
		}
		_, err := ob.Write(ctx, tx, outbox.Message{
			Exchange:    "orders",
			RoutingKey:  "order.placed",
			Body:        []byte(`{"customer":"ada"}`),
			ContentType: "application/json",
			Headers:     map[string]any{"order-id": orderID},
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	<-ctx.Done()
}

// A relay that publishes every message in the order it was written: one
// publish at a time, each after the one before it was confirmed. A message
// that fails is still retried after later ones went out.
func ExampleWithConcurrency() {
	var ob *outbox.Outbox // from outbox.New
	t, err := rabbitmq.Dial(context.Background(), os.Getenv("ACEMQ_AMQP_URL"))
	if err != nil {
		log.Fatal(err)
	}
	relay, err := outbox.NewRelay(ob, t,
		outbox.WithConcurrency(1),
		outbox.WithBackoff(time.Second, time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	_ = relay
}

// Message to a queue by name, with the id of the business event, so that
// writing the same event twice gives consumers the same x-acemq-id.
func ExampleOutbox_Write() {
	var (
		ctx context.Context
		ob  *outbox.Outbox
		tx  pgx.Tx // the caller's transaction
	)
	id, err := ob.Write(ctx, tx, outbox.Message{
		Queue: "billing.invoices",
		ID:    "invoice-2026-0042",
		Body:  []byte(`{"invoice":"2026-0042"}`),
	})
	if err != nil {
		log.Fatal(err) // errors.Is(err, outbox.ErrInvalidMessage), outbox.ErrTooLarge, or the database's
	}
	log.Print(id)
}
