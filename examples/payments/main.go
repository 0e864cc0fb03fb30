// Command payments is a payment service as a newcomer would build it from
// the docs: it takes charge commands, charges a card gateway that times
// out now and then, and announces every settled payment to whoever
// subscribes.
//
//	go run ./examples/payments                                  # memory transport, $ACEMQ_POSTGRES_URL
//	ACEMQ_AMQP_URL=amqp://guest:guest@localhost:5672/ go run ./examples/payments
//
// What it shows, each in a few lines:
//   - JSON commands decoded into a struct (acemq.Decoded); a body that is
//     not JSON is parked;
//   - exponential retries (1 s, 2 s, ... 32 s), the long ones on a rung
//     queue in the broker; a declined card is dead-lettered at once;
//   - handled once: the charge claims the message's id in the same
//     PostgreSQL transaction that records the payment and writes its
//     event (idempotency.Postgres.ClaimTx, outbox.Write);
//   - the payment.settled event relayed from the outbox to a topic
//     exchange and fanned out to three queues bound by QueueConfig.Bindings;
//   - slog for logs, OpenTelemetry's global providers for traces and
//     metrics, the transport picked by URL, and a graceful stop on SIGTERM.
//
// PostgreSQL is required (ACEMQ_POSTGRES_URL); the broker is not.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/dial"
)

// The queues and the exchange, as every service that talks to this one
// names them.
const (
	Charges = "payments.charge"
	Events  = "payments.events"
)

// Subscribers are the three queues that get a copy of every payment event.
var Subscribers = map[string]string{
	"ledger.payments":    "payment.*",
	"receipts.payments":  "payment.settled",
	"analytics.payments": "#",
}

// Policy retries a charge six times in all: 1 s, 2 s, 4 s and 8 s in the
// process, 16 s and 32 s on rungs.
var Policy = retry.Exponential(6, time.Second, time.Minute).WithBrokerWaitThreshold(15 * time.Second)

// Charge is the command.
type Charge struct {
	PaymentID string `json:"payment_id"`
	Card      string `json:"card"`
	Cents     int64  `json:"cents"`
}

// Settled is the event.
type Settled struct {
	PaymentID string `json:"payment_id"`
	Cents     int64  `json:"cents"`
}

// Errors the gateway answers with.
var (
	ErrDeclined = errors.New("gateway: card declined")
	ErrTimeout  = errors.New("gateway: timed out")
)

// Gateway charges a card; key makes a repeated call with the same key
// charge once.
type Gateway interface {
	Charge(ctx context.Context, key, card string, cents int64) error
}

// Service is the payment service's state.
type Service struct {
	Pool    *pgxpool.Pool
	Claims  *idempotency.Postgres
	Outbox  *outbox.Outbox
	Gateway Gateway
}

// New opens the service's tables (a real service runs these as migrations).
func New(ctx context.Context, pool *pgxpool.Pool, gw Gateway) (*Service, error) {
	claims, err := idempotency.NewPostgres(pool, idempotency.WithTable("payments_handled"))
	if err != nil {
		return nil, err
	}
	ob, err := outbox.New(pool, outbox.WithTable("payments_outbox"))
	if err != nil {
		return nil, err
	}
	schema := `CREATE TABLE IF NOT EXISTS payments (id text PRIMARY KEY, cents bigint NOT NULL, settled_at timestamptz NOT NULL DEFAULT now());` +
		claims.CreateTableSQL() + ";" + ob.CreateTableSQL()
	if _, err := pool.Exec(ctx, schema); err != nil {
		return nil, fmt.Errorf("payments: create tables: %w", err)
	}
	return &Service{Pool: pool, Claims: claims, Outbox: ob, Gateway: gw}, nil
}

// Charge handles one command: once per message id, whatever the
// redeliveries, with the payment and its event committed together.
func (s *Service) Charge(ctx context.Context, m *acemq.Message, c Charge) ack.Ack {
	if c.PaymentID == "" || c.Cents <= 0 {
		return ack.DeadLetter(fmt.Errorf("charge %q of %d cents: not a charge", c.PaymentID, c.Cents))
	}
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		claim, err := s.Claims.ClaimTx(ctx, tx, m.ID())
		if err != nil || claim == idempotency.Done {
			return err // done before: commit nothing new
		}
		if err := s.Gateway.Charge(ctx, m.ID(), c.Card, c.Cents); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO payments (id, cents) VALUES ($1, $2) ON CONFLICT DO NOTHING", c.PaymentID, c.Cents); err != nil {
			return err
		}
		body, err := codec.JSON.Marshal(Settled{PaymentID: c.PaymentID, Cents: c.Cents})
		if err != nil {
			return err
		}
		_, err = s.Outbox.Write(ctx, tx, outbox.Message{Exchange: Events, RoutingKey: "payment.settled", Body: body, ContentType: codec.JSON.ContentType()})
		return err
	})
	switch {
	case errors.Is(err, ErrDeclined):
		return ack.DeadLetter(err)
	case err != nil:
		return ack.Retry(err) // the gateway timed out, or the database failed
	}
	return ack.Accept()
}

// Mux routes the commands to Charge and each subscriber's events to on;
// the queue configs bind the subscribers to the events exchange.
func (s *Service) Mux(on func(subscriber string, e Settled)) (*acemq.Mux, map[string]acemq.QueueConfig) {
	mux := acemq.NewMux()
	mux.Handle(Charges, acemq.Decoded(codec.JSON, s.Charge))
	queues := map[string]acemq.QueueConfig{}
	for q, key := range Subscribers {
		mux.Handle(q, acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, e Settled) ack.Ack {
			on(m.Queue(), e)
			return ack.Accept()
		}))
		queues[q] = acemq.QueueConfig{Bindings: []acemq.Binding{{Exchange: Events, Keys: []string{key}}}}
	}
	return mux, queues
}

// Run serves until ctx ends, then stops gracefully: the server drains and
// the relay records what it published.
func (s *Service) Run(ctx context.Context, t transport.Transport, log *slog.Logger) error {
	mux, queues := s.Mux(func(subscriber string, e Settled) {
		log.Info("payment settled", "subscriber", subscriber, "payment", e.PaymentID, "cents", e.Cents)
	})
	srv := &acemq.Server{Transport: t, Handler: mux, Retry: Policy, Queues: queues, Logger: acemq.FromSlog(log)}
	relay, err := outbox.NewRelay(s.Outbox, t, outbox.WithLogger(acemq.FromSlog(log)))
	if err != nil {
		return err
	}
	errs := make(chan error, 2)
	go func() { errs <- srv.Run(ctx) }()
	select {
	case <-srv.Ready(): // declared and subscribed, Events included: the relay may start
	case err := <-errs:
		return err
	}
	go func() { errs <- relay.Run(ctx) }()
	log.Info("payments: serving", "queues", len(queues)+1)
	return errors.Join(<-errs, <-errs)
}

// flaky is a gateway that times out on every third call and declines
// card "4000 0000 0000 0002", as test cards do.
type flaky struct{ calls int }

func (g *flaky) Charge(_ context.Context, _, card string, _ int64) error {
	g.calls++
	switch {
	case card == "4000 0000 0000 0002":
		return ErrDeclined
	case g.calls%3 == 0:
		return ErrTimeout
	}
	return nil
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("payments", "error", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tp, mp := sdktrace.NewTracerProvider(), sdkmetric.NewMeterProvider() // add your exporters here
	defer func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)

	pgURL := os.Getenv("ACEMQ_POSTGRES_URL")
	if pgURL == "" {
		return errors.New("set ACEMQ_POSTGRES_URL to a PostgreSQL database")
	}
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	t, err := dial.Transport(ctx, cmp.Or(os.Getenv("ACEMQ_AMQP_URL"), "memory://payments"))
	if err != nil {
		return err
	}
	defer t.Close()
	svc, err := New(ctx, pool, &flaky{})
	if err != nil {
		return err
	}
	if os.Getenv("ACEMQ_AMQP_URL") == "" { // a demo on the memory broker: a few charges, then stop
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		go demo(ctx, t, log)
	}
	return svc.Run(ctx, t, log)
}

// demo sends three charges once the service is up, one of them declined.
func demo(ctx context.Context, t transport.Transport, log *slog.Logger) {
	pub := &acemq.Publisher{Transport: t, Mandatory: true}
	for i, card := range []string{"4242 4242 4242 4242", "4000 0000 0000 0002", "5555 5555 5555 4444"} {
		c := Charge{PaymentID: fmt.Sprintf("pay-%d-%d", time.Now().Unix(), i), Card: card, Cents: 1250}
		for {
			if _, err := pub.PublishValue(ctx, acemq.Outgoing{RoutingKey: Charges}, c); err == nil || ctx.Err() != nil {
				break
			}
			select { // the queue is not declared yet
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		log.Info("payments: charge sent", "payment", c.PaymentID)
	}
}
