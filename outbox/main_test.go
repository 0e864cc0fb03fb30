package outbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
	"github.com/acemq/acemq/transport/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// uniq is a name of this test's own, so runs and parallel tests never
// collide.
func uniq(prefix string) string { return fmt.Sprintf("%s_%012x", prefix, rand.Uint64()>>16) }

// newOutbox creates an outbox on a table of its own, dropped when the test
// ends.
func newOutbox(tb testing.TB, pool *pgxpool.Pool, opts ...outbox.Option) *outbox.Outbox {
	tb.Helper()
	table := uniq("outbox_test")
	o, err := outbox.New(pool, append([]outbox.Option{outbox.WithTable(table)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, o.CreateTableSQL()); err != nil {
		tb.Fatalf("create %s: %v", table, err)
	}
	tb.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+"; DROP FUNCTION IF EXISTS "+table+"_notify()"); err != nil {
			tb.Errorf("drop %s: %v", table, err)
		}
	})
	return o
}

// write commits msgs in one transaction and returns their ids.
func write(tb testing.TB, pool *pgxpool.Pool, o *outbox.Outbox, msgs ...outbox.Message) []string {
	tb.Helper()
	var ids []string
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		for _, m := range msgs {
			id, err := o.Write(context.Background(), tx, m)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return ids
}

// broker is a transport under test and how to look at its queues.
type broker struct {
	name string
	// connect returns a new transport, closed when the test ends.
	connect func(tb testing.TB) transport.Transport
	// deleteQueue removes a queue the test declared.
	deleteQueue func(tb testing.TB, q string)
	// deleteExchange removes an exchange the test declared.
	deleteExchange func(tb testing.TB, x string)
}

// brokers are the transports every relay test runs on: the memory
// transport always, RabbitMQ when ACEMQ_AMQP_URL is set (and under CI).
func brokers(t *testing.T) []broker { return brokersB(t) }

func brokersB(t testing.TB) []broker {
	t.Helper()
	mem := memory.New(memory.WithRealClock())
	t.Cleanup(func() { _ = mem.Close() })
	bs := []broker{{
		name: "memory",
		connect: func(tb testing.TB) transport.Transport {
			c := mem.Connect()
			tb.Cleanup(func() { _ = c.Close() })
			return c
		},
		deleteQueue:    func(tb testing.TB, q string) { mem.DeleteQueue(q) },
		deleteExchange: func(testing.TB, string) {}, // the broker is the test's own
	}}
	url := brokertest.Optional(t, "ACEMQ_AMQP_URL")
	if url == "" {
		return bs
	}
	return append(bs, broker{
		name: "rabbitmq",
		connect: func(tb testing.TB) transport.Transport {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := rabbitmq.Dial(ctx, url, rabbitmq.WithConnectionName(tb.Name()))
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = c.Close() })
			return c
		},
		deleteQueue: func(tb testing.TB, q string) {
			withChannel(tb, url, "delete queue "+q, func(ch *amqp.Channel) error {
				_, err := ch.QueueDelete(q, false, false, false)
				return err
			})
		},
		deleteExchange: func(tb testing.TB, x string) {
			withChannel(tb, url, "delete exchange "+x, func(ch *amqp.Channel) error {
				return ch.ExchangeDelete(x, false, false)
			})
		},
	})
}

// withChannel runs f on a plain amqp091-go channel, for clean-up the
// transport does not offer; failures are logged.
func withChannel(tb testing.TB, url, what string, f func(ch *amqp.Channel) error) {
	tb.Helper()
	if err := brokertest.OnChannel(url, f); err != nil {
		tb.Logf("%s: %v", what, err)
	}
}

// declareQueue declares a durable queue, deleted when the test ends.
func (b broker) declareQueue(tb testing.TB, tr transport.Transport, q string) {
	tb.Helper()
	if err := tr.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true}}}); err != nil {
		tb.Fatalf("declare %s: %v", q, err)
	}
	tb.Cleanup(func() { b.deleteQueue(tb, q) })
}

// run starts r and returns a stop function that cancels it and returns
// Run's error; the test fails if Run had returned early.
func run(tb testing.TB, r *outbox.Relay) (stop func() error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(30 * time.Second):
				tb.Fatal("Run did not return within 30s of its ctx ending")
			}
		})
		return err
	}
	tb.Cleanup(func() { _ = stop() })
	return stop
}

func newRelay(tb testing.TB, o *outbox.Outbox, tr transport.Transport, opts ...outbox.RelayOption) *outbox.Relay {
	tb.Helper()
	r, err := outbox.NewRelay(o, tr, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// header reads a string header of d.
func header(d transport.Delivery, k string) string {
	s, _ := d.Headers[k].(string)
	return s
}
