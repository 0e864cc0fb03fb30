package idempotency_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/brokertest"
)

// Three stores on one table stand for three instances of a service. A's
// lease ends while its handler still runs and B, in another process, takes
// the id over: whatever A does next, C must not be let in while B works.
func TestPostgresTakeoverAcrossInstances(t *testing.T) {
	t.Parallel()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 10})
	const a, b, c = 0, 1, 2
	type move struct {
		store int
		step
	}
	tests := []struct {
		name  string
		moves []move
	}{
		{"A's release leaves B's claim", []move{
			{a, claimed("x")}, {a, after(suiteLease)}, {b, claimed("x")}, {a, released("x")},
			{c, inProgress("x")}, {a, inProgress("x")}, {b, confirmed("x")}, {c, done("x")},
		}},
		{"A's confirm records the id all the same", []move{
			{a, claimed("x")}, {a, after(suiteLease)}, {b, claimed("x")}, {a, confirmed("x")},
			{c, done("x")}, {b, released("x")}, {c, done("x")},
		}},
		{"B's release frees the id", []move{
			{a, claimed("x")}, {a, after(suiteLease)}, {b, claimed("x")}, {a, released("x")}, {b, released("x")},
			{c, claimed("x")},
		}},
		{"B's release before A's frees the id", []move{
			{a, claimed("x")}, {a, after(suiteLease)}, {b, claimed("x")}, {b, released("x")}, {a, released("x")},
			{c, claimed("x")},
		}},
		{"A's release after B's lease ended and C took over leaves C's claim", []move{
			{a, claimed("x")}, {a, after(suiteLease)}, {b, claimed("x")}, {b, after(suiteLease)}, {c, claimed("x")},
			{a, released("x")}, {b, released("x")}, {b, inProgress("x")}, {c, released("x")}, {b, claimed("x")},
		}},
		{"a claim inside a transaction is not released by the lease it took over", []move{
			{a, claimed("x")}, {a, after(suiteLease)}, {b, claimed("x")}, {b, after(suiteLease)},
			{c, step{op: claimTxCommitted, id: "x", want: idempotency.Claimed}}, {a, released("x")}, {b, released("x")},
			{a, done("x")},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			first, table := newPostgres(t, pool, idempotency.WithLease(suiteLease), idempotency.WithRetention(suiteRetention),
				idempotency.WithClock(clock))
			stores := []*idempotency.Postgres{first}
			for range 2 {
				s, err := idempotency.NewPostgres(pool, idempotency.WithTable(table), idempotency.WithLease(suiteLease),
					idempotency.WithRetention(suiteRetention), idempotency.WithClock(clock))
				if err != nil {
					t.Fatal(err)
				}
				stores = append(stores, s)
			}
			for i, mv := range tt.moves {
				what := fmt.Sprintf("step %d, store %c", i, "ABC"[mv.store])
				if mv.op == claimTxCommitted {
					ctx := context.Background()
					tx, r := claimTx(t, pool, stores[mv.store], mv.id)
					if r != mv.want {
						t.Fatalf("%s: ClaimTx(%s) = %v, want %v", what, short(mv.id), r, mv.want)
					}
					if err := tx.Commit(ctx); err != nil {
						t.Fatal(err)
					}
					continue
				}
				mv.run(t, stores[mv.store], clock, what)
			}
		})
	}
}

// claimTxCommitted is a step of TestPostgresTakeoverAcrossInstances: a
// ClaimTx in a transaction that commits at once.
const claimTxCommitted op = -1

// The table as versions before the owner column made it. CreateTableSQL
// brings it up to date, and the claims it held keep their meaning.
func TestPostgresUpgradesAnOldTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
	clock := newFakeClock()
	table := testTable()
	s, err := idempotency.NewPostgres(pool, idempotency.WithTable(table), idempotency.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	old := `CREATE TABLE ` + table + ` (
	id           text        PRIMARY KEY,
	claimed_at   timestamptz NOT NULL,
	lease_until  timestamptz,
	confirmed_at timestamptz,
	CHECK ((lease_until IS NULL) <> (confirmed_at IS NULL))
);
INSERT INTO ` + table + ` (id, claimed_at, lease_until) VALUES ('held', $1, $1::timestamptz + interval '1 minute');
INSERT INTO ` + table + ` (id, claimed_at, confirmed_at) VALUES ('done', $1, $1)`
	// pgx sends one statement per Exec when it has arguments.
	for stmt := range strings.SplitSeq(old, ";\n") {
		var args []any
		if strings.Contains(stmt, "$1") {
			args = []any{clock.Now()}
		}
		if _, err := pool.Exec(ctx, stmt, args...); err != nil {
			t.Fatalf("the old table: %v", err)
		}
	}
	createTable(t, pool, s, table) // drops it at the end, too
	if _, err := pool.Exec(ctx, s.CreateTableSQL()); err != nil {
		t.Fatalf("CreateTableSQL is not repeatable on an upgraded table: %v", err)
	}
	steps := []step{
		inProgress("held"), released("held"), inProgress("held"), // an old version's claim: not this store's to release
		done("done"),
		claimed("new"), released("new"), claimed("new"), confirmed("new"), done("new"),
		after(time.Minute), claimed("held"), released("held"), claimed("held"),
	}
	for i, st := range steps {
		st.run(t, s, clock, fmt.Sprint("step ", i))
	}
}
