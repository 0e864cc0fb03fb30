package outbox

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/transport/memory"
)

// TestWritersSkipNotifyWhileRelayAwake: a row committed while a relay
// holds the awake lock sends no notification, one committed once it
// slept does. The listener tells them apart by the sending backend: the
// first row's writer is one connection, the second's another, and
// notifications arrive in commit order, so if the first had notified,
// its notification would come first.
func TestWritersSkipNotifyWhileRelayAwake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 4})
	table := fmt.Sprintf("outbox_awake_%012x", rand.Uint64()>>16)
	o, err := New(pool, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, o.CreateTableSQL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+"; DROP FUNCTION IF EXISTS "+table+"_notify()")
	})
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	tr := mem.Connect()
	t.Cleanup(func() { _ = tr.Close() })
	r, err := NewRelay(o, tr, WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}

	conn := func() *pgx.Conn {
		pc, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := pc.Hijack()
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	listener, first, second := conn(), conn(), conn()
	if _, err := listener.Exec(ctx, o.q.listen); err != nil {
		t.Fatal(err)
	}
	writeOn := func(c *pgx.Conn) {
		t.Helper()
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := o.Write(ctx, tx, Message{Queue: "q", Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}

	aw := &awake{r: r}
	defer aw.close(ctx)
	aw.take(ctx)
	if !aw.held {
		t.Fatal("the awake lock was not taken")
	}
	writeOn(first)
	if !aw.sleep(ctx) || aw.held {
		t.Fatal("the relay could not go to sleep with no writer's transaction open")
	}
	writeOn(second)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(wctx)
	if err != nil {
		t.Fatalf("no notification of the row written while the relay slept: %v", err)
	}
	if want := second.PgConn().PID(); n.PID != want {
		t.Errorf("the first notification came from backend %d, want %d (the second writer): the row written while the relay was awake notified (first writer %d)",
			n.PID, want, first.PgConn().PID())
	}
}

// TestRelayCannotSleepWhileWriterOpen: a relay holding the awake lock does
// not let go of it while a writer's transaction that inserted is open
// (that writer skipped its notification and nobody else would look for
// its row), and does once it committed.
func TestRelayCannotSleepWhileWriterOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 4})
	table := fmt.Sprintf("outbox_awake_%012x", rand.Uint64()>>16)
	o, err := New(pool, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, o.CreateTableSQL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+"; DROP FUNCTION IF EXISTS "+table+"_notify()")
	})
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	tr := mem.Connect()
	t.Cleanup(func() { _ = tr.Close() })
	r, err := NewRelay(o, tr, WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	aw := &awake{r: r}
	defer aw.close(ctx)
	aw.take(ctx)
	if !aw.held {
		t.Fatal("the awake lock was not taken")
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := o.Write(ctx, tx, Message{Queue: "q", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if aw.sleep(ctx) || !aw.held {
		t.Fatal("the relay let go of the awake lock while a writer's transaction was open")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !aw.sleep(ctx) || aw.held {
		t.Fatal("the relay kept the awake lock after the writer committed")
	}
}
