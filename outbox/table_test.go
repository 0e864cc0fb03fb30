package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/outbox"
)

// A relay needs no more than one pooled connection: the claim of a batch
// waits for the one before it to settle rather than deadlock.
func TestRelayOnAPoolOfOne(t *testing.T) {
	t.Parallel()
	f := setup(t, brokers(t)[0])
	c := collect(t, f.tr, f.queue)
	o, err := outbox.New(brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 1}), outbox.WithTable(f.o.Table()))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []outbox.Message
	for range 300 {
		msgs = append(msgs, outbox.Message{Queue: f.queue, Body: []byte("1")})
	}
	write(t, f.pool, f.o, msgs...)
	stop := run(t, newRelay(t, o, f.tr, outbox.WithBatchSize(50)))
	c.wait(t, 300, 20*time.Second)
	f.waitEmpty(t, 5*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A schema-qualified table gets its trigger function in its schema, and
// relays hear its notifications (the channel is "schema.table").
func TestSchemaQualifiedTable(t *testing.T) {
	t.Parallel()
	b := brokers(t)[0]
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 4})
	schema := uniq("outbox_schema")
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	o, err := outbox.New(pool, outbox.WithTable(schema+".outbox"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if _, err := pool.Exec(ctx, o.CreateTableSQL()); err != nil {
			t.Fatal(err)
		}
	}
	tr := b.connect(t)
	q := uniq("q")
	b.declareQueue(t, tr, q)
	c := collect(t, tr, q)
	stop := run(t, newRelay(t, o, tr, outbox.WithPollInterval(time.Hour)))
	time.Sleep(100 * time.Millisecond) // let the relay LISTEN first
	write(t, pool, o, outbox.Message{Queue: q, Body: []byte("x")})
	c.wait(t, 1, 10*time.Second) // no poll for an hour: the notification woke it
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
