package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/middleware"
)

// effects is the side effect of an idempotent handler: a row per time the
// work was done, so that doing it twice shows.
type effects struct {
	pool  *pgxpool.Pool
	table string
}

// newEffects creates an effects table and a store table of the test's own,
// dropped when it ends, and returns their names.
func newTables(tb testing.TB, pool *pgxpool.Pool) (effectsTable, storeTable string) {
	tb.Helper()
	suffix := fmt.Sprintf("%016x", rand.Uint64())
	effectsTable, storeTable = "faults_effects_"+suffix, "faults_idem_"+suffix
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+effectsTable+" (id text NOT NULL, at timestamptz NOT NULL DEFAULT now())"); err != nil {
		tb.Fatal(err)
	}
	store := newStore(tb, pool, storeTable)
	if _, err := pool.Exec(ctx, store.CreateTableSQL()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+effectsTable+", "+storeTable)
	})
	return effectsTable, storeTable
}

func newStore(tb testing.TB, pool *pgxpool.Pool, table string) *idempotency.Postgres {
	tb.Helper()
	s, err := idempotency.NewPostgres(pool, idempotency.WithTable(table))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func (e effects) do(ctx context.Context, id string) error {
	_, err := e.pool.Exec(ctx, "INSERT INTO "+e.table+" (id) VALUES ($1)", id)
	return err
}

// counts is how many times the work was done, by id.
func (e effects) counts(tb testing.TB) map[string]int {
	tb.Helper()
	rows, err := e.pool.Query(context.Background(), "SELECT id, count(*) FROM "+e.table+" GROUP BY id")
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			tb.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// idempotentHandler follows each message's script behind
// middleware.Idempotent: on the accepting path it does the work, then
// takes a moment before it returns, so that a fault often lands between the
// work and the ack. dups counts the redeliveries the middleware accepted
// without calling it.
func idempotentHandler(store idempotency.Store, eff effects, dups *atomic.Int64) acemq.Handler {
	h := acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, j job) ack.Ack {
		if a := script(m, j); a.Outcome() != ack.OutcomeAccept {
			return a
		}
		if err := eff.do(ctx, m.ID()); err != nil {
			return ack.Retry(err)
		}
		time.Sleep(5 * time.Millisecond)
		return ack.Accept()
	})
	return middleware.Idempotent(store, middleware.WithDuplicateHook(func(context.Context, *acemq.Message) { dups.Add(1) }))(h)
}

// TestFaultIdempotentRedeliveries is scenario 10: an idempotent handler
// (middleware.Idempotent on the PostgreSQL store) under the redeliveries of
// scenarios 1 and 4, on the private node: the broker restarted, then every
// connection closed by force, twice. The side effect happens exactly once
// per id.
func TestFaultIdempotentRedeliveries(t *testing.T) {
	const name = "idempotent-redeliveries"
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
	n := node.Get(t)
	n.Acquire(t)
	url, vh := n.FreshVhost(t)
	effectsTable, storeTable := newTables(t, pool)
	eff := effects{pool: pool, table: effectsTable}
	var dups atomic.Int64

	log := testLogger(t)
	q := "faults." + name
	js := jobs(name, 300)
	pol := testPolicy()
	srvTr := dial(t, url, log)
	pubTr := dial(t, url, log)
	run := serve(t, srvTr, q, &acemq.Server{Retry: pol, PublishTimeout: 5 * time.Second},
		idempotentHandler(newStore(t, pool, storeTable), eff, &dups), log)
	stats := &publishStats{}
	published := make(chan []job, 1)
	go func() { published <- publishAll(t, pubTr, q, js, 4, 40*time.Millisecond, stats) }()
	polltest.Within(t, 30*time.Second, "the handler is busy", func() bool { return len(eff.counts(t)) >= 30 })
	n.StopApp(t)
	time.Sleep(500 * time.Millisecond)
	n.StartApp(t)
	for i := range 2 {
		polltest.Within(t, 30*time.Second, "the server consumes again", func() bool {
			info, err := srvTr.Inspect(context.Background(), q)
			return err == nil && info.Consumers > 0
		})
		time.Sleep(300 * time.Millisecond)
		n.Ctl(t, "close_all_connections", "-p", vh, fmt.Sprintf("acemq faults: forced close %d", i+1))
	}
	sent := <-published
	t.Logf("%s: producer: %s", name, stats)
	sk := newSink(url, q)
	if !polltest.Until(60*time.Second, func() bool { return sk.settled(&ledger{accepted: eff.counts(t)}, sent)() }) {
		t.Errorf("%s: not settled within 60s", name)
	}
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	sk.collect(t, name, sent, eff.counts(t), pol).report(t)
	t.Logf("%s: %d redeliveries accepted by the middleware without running the work", name, dups.Load())
	onlyOnce(t, eff)
}

// onlyOnce fails the test for each id whose work was done more than once.
func onlyOnce(t *testing.T, eff effects) {
	t.Helper()
	for id, n := range eff.counts(t) {
		if n > 1 {
			t.Errorf("the work for %s was done %d times", id, n)
		}
	}
}

// transactionalHandler does the work and claims the id in one transaction
// (idempotency.Postgres.ClaimTx): the claim commits or rolls back with the
// work, so a consumer killed at any point leaves either both or neither.
// It is the arrangement where "handled once" holds even under SIGKILL.
func transactionalHandler(store *idempotency.Postgres, eff effects) acemq.Handler {
	return acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, j job) ack.Ack {
		if a := script(m, j); a.Outcome() != ack.OutcomeAccept {
			return a
		}
		tx, err := eff.pool.Begin(ctx)
		if err != nil {
			return ack.Retry(err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		res, err := store.ClaimTx(ctx, tx, m.ID())
		switch {
		case err != nil:
			return ack.Retry(err)
		case res == idempotency.Done:
			return ack.Accept() // done and committed before
		case res != idempotency.Claimed:
			return ack.Retry(fmt.Errorf("claim %s: %v", m.ID(), res))
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+eff.table+" (id) VALUES ($1)", m.ID()); err != nil {
			return ack.Retry(err)
		}
		time.Sleep(5 * time.Millisecond) // widen the window a kill can land in
		if err := tx.Commit(ctx); err != nil {
			return ack.Retry(err)
		}
		return ack.Accept()
	})
}
