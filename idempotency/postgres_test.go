package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq/idempotency"
)

// postgresPool connects to ACEMQ_POSTGRES_URL and closes the pool when the
// test ends. The test skips when the variable is unset, except under CI,
// where a missing database is a failure rather than a silent pass.
func postgresPool(tb testing.TB, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	raw := brokertest.PostgresURL(tb)
	cfg, err := pgxpool.ParseConfig(raw)
	if err != nil {
		tb.Fatalf("ACEMQ_POSTGRES_URL %s: %v", redact(raw), errors.Unwrap(err))
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("connect to %s: %v", redact(raw), err)
	}
	tb.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		tb.Fatalf("connect to %s: %v", redact(raw), err)
	}
	return pool
}

// redact hides the password of a connection URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// testTable is a table name of this test's own, so runs never collide.
func testTable() string { return fmt.Sprintf("idem_test_%016x", rand.Uint64()) }

// newPostgres builds a store on a fresh table of its own, created now and
// dropped when the test ends.
func newPostgres(tb testing.TB, pool *pgxpool.Pool, opts ...idempotency.PostgresOption) (*idempotency.Postgres, string) {
	tb.Helper()
	table := testTable()
	s, err := idempotency.NewPostgres(pool, append([]idempotency.PostgresOption{idempotency.WithTable(table)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	createTable(tb, pool, s, table)
	return s, table
}

func createTable(tb testing.TB, pool *pgxpool.Pool, s *idempotency.Postgres, table string) {
	tb.Helper()
	if _, err := pool.Exec(context.Background(), s.CreateTableSQL()); err != nil {
		tb.Fatalf("create %s: %v", table, err)
	}
	tb.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table); err != nil {
			tb.Errorf("drop %s: %v", table, err)
		}
	})
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	pool := postgresPool(t, 20) // PostgreSQL allows 100 connections, and others share it
	runStoreSuite(t, func(t *testing.T, clock *fakeClock) idempotency.Store {
		s, _ := newPostgres(t, pool, idempotency.WithLease(suiteLease), idempotency.WithRetention(suiteRetention),
			idempotency.WithClock(clock.Now))
		return s
	})
}

func TestPostgresDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgresPool(t, 0)
	const lease = 500 * time.Millisecond
	s, _ := newPostgres(t, pool, idempotency.WithLease(lease))
	before := time.Now()
	if r, err := s.Claim(ctx, "a"); r != idempotency.Claimed || err != nil {
		t.Fatalf("first Claim = %v, %v", r, err)
	}
	r, err := s.Claim(ctx, "a")
	// Both claims ran within the time taken, by the database's clock, so
	// the second is inside the lease unless a busy machine stalled them.
	if took := time.Since(before); took < lease && (r != idempotency.InProgress || err != nil) {
		t.Fatalf("second Claim %v after the first = %v, %v; want in progress", took, r, err)
	}
	// The database's own clock ends the lease; poll rather than guess.
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := s.Claim(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if r == idempotency.Claimed {
			break
		}
		if r != idempotency.InProgress {
			t.Fatalf("Claim of an unconfirmed id = %v", r)
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Confirm(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(lease + 50*time.Millisecond) // longer than the lease, far shorter than retention
	if r, err := s.Claim(ctx, "a"); r != idempotency.Done || err != nil {
		t.Fatalf("Claim after Confirm = %v, %v; want done", r, err)
	}
}

// Two pools stand for two instances of a service: the claim is decided by
// the database, not by anything either process holds.
func TestPostgresConcurrentClaimsAcrossPools(t *testing.T) {
	t.Parallel()
	pools := []*pgxpool.Pool{postgresPool(t, 10), postgresPool(t, 10)}
	first, table := newPostgres(t, pools[0])
	second, err := idempotency.NewPostgres(pools[1], idempotency.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	stores := []*idempotency.Postgres{first, second}
	for round := range 10 {
		id := fmt.Sprint("race-", round)
		var wins, inProgress atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range racers {
			wg.Go(func() {
				<-start
				r, err := stores[g%2].Claim(context.Background(), id)
				if err != nil {
					t.Error(err)
				}
				switch r {
				case idempotency.Claimed:
					wins.Add(1)
				case idempotency.InProgress:
					inProgress.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if w, p := wins.Load(), inProgress.Load(); w != 1 || p != racers-1 {
			t.Fatalf("%s: of %d claims across two pools %d won and %d were in progress, want 1 and the rest", id, racers, w, p)
		}
	}
}

// Three stores on one table stand for three instances of a service. A's
// lease ends while its handler still runs and B, in another process, takes
// the id over: whatever A does next, C must not be let in while B works.
func TestPostgresTakeoverAcrossInstances(t *testing.T) {
	t.Parallel()
	pool := postgresPool(t, 10)
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
				idempotency.WithClock(clock.Now))
			stores := []*idempotency.Postgres{first}
			for range 2 {
				s, err := idempotency.NewPostgres(pool, idempotency.WithTable(table), idempotency.WithLease(suiteLease),
					idempotency.WithRetention(suiteRetention), idempotency.WithClock(clock.Now))
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
	pool := postgresPool(t, 0)
	clock := newFakeClock()
	table := testTable()
	s, err := idempotency.NewPostgres(pool, idempotency.WithTable(table), idempotency.WithClock(clock.Now))
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

func TestPostgresCleanup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgresPool(t, 0)
	clock := newFakeClock()
	s, table := newPostgres(t, pool, idempotency.WithLease(time.Minute), idempotency.WithRetention(time.Hour),
		idempotency.WithClock(clock.Now))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	claim := func(id string) {
		t.Helper()
		_, err := s.Claim(ctx, id)
		must(err)
	}
	claim("abandoned") // lease ends at +1m
	claim("old")
	must(s.Confirm(ctx, "old")) // retention ends at +1h
	clock.Advance(30 * time.Minute)
	claim("recent")
	must(s.Confirm(ctx, "recent")) // retention ends at +1h30m
	claim("in-flight")             // lease ends at +31m

	clock.Advance(30*time.Minute + time.Second) // now +1h0m1s
	n, err := s.Cleanup(ctx)
	must(err)
	if n != 3 {
		t.Errorf("Cleanup deleted %d rows, want 3 (abandoned, old, in-flight)", n)
	}
	var left []string
	rows, err := pool.Query(ctx, "SELECT id FROM "+table+" ORDER BY id")
	must(err)
	for rows.Next() {
		var id string
		must(rows.Scan(&id))
		left = append(left, id)
	}
	must(rows.Err())
	if strings.Join(left, ",") != "recent" {
		t.Errorf("rows left after Cleanup: %v, want [recent]", left)
	}
	if n, err := s.Cleanup(ctx); n != 0 || err != nil {
		t.Errorf("second Cleanup = %d, %v; want 0, nil", n, err)
	}
}

func TestPostgresSchemaQualifiedTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgresPool(t, 0)
	schema := testTable()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	s, err := idempotency.NewPostgres(pool, idempotency.WithTable(schema+".idempotency"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, s.CreateTableSQL()); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, s.CreateTableSQL()); err != nil {
		t.Fatalf("CreateTableSQL is not repeatable: %v", err)
	}
	if r, err := s.Claim(ctx, "a"); r != idempotency.Claimed || err != nil {
		t.Fatalf("Claim = %v, %v", r, err)
	}
}

// The odd ids are stored as data: the plain ones exactly as given, the
// others as their key, and none of them runs as SQL.
func TestPostgresOddIDsAreData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgresPool(t, 0)
	s, table := newPostgres(t, pool)
	want := map[string]bool{}
	for _, tt := range oddIDs() {
		if r, err := s.Claim(ctx, tt.id); r != idempotency.Claimed || err != nil {
			t.Fatalf("%s: Claim = %v, %v", tt.name, r, err)
		}
		key, _ := idempotency.Key(tt.id)
		want[key] = true
	}
	rows, err := pool.Query(ctx, "SELECT id FROM "+table)
	if err != nil {
		t.Fatalf("the table is gone or unreadable: %v", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(want) {
		t.Errorf("%d rows for %d ids", len(ids), len(want))
	}
	for _, id := range ids {
		if !want[id] {
			t.Errorf("row %s is no id's key", id)
		}
		if len(id) > 255 {
			t.Errorf("a row id of %d bytes", len(id))
		}
	}
	for _, tt := range oddIDs() {
		if key, _ := idempotency.Key(tt.id); key == tt.id && !slices.Contains(ids, tt.id) {
			t.Errorf("%s: the id is not stored as it is", tt.name)
		}
	}
}

// ClaimTx files an id under the same key as Claim, odd ids included.
func TestPostgresClaimTxSharesKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgresPool(t, 0)
	s, _ := newPostgres(t, pool)
	for _, tt := range oddIDs() {
		if r, err := s.Claim(ctx, tt.id); r != idempotency.Claimed || err != nil {
			t.Fatalf("%s: Claim = %v, %v", tt.name, r, err)
		}
		tx, r := claimTx(t, pool, s, tt.id)
		if r != idempotency.InProgress {
			t.Errorf("%s: ClaimTx of an id Claim holds = %v, want in progress", tt.name, r)
		}
		_ = tx.Rollback(ctx) // give its connection back to the pool
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if r, err := s.ClaimTx(ctx, tx, ""); r != 0 || !errors.Is(err, idempotency.ErrEmptyID) {
		t.Errorf("ClaimTx(\"\") = %v, %v; want the zero result, ErrEmptyID", r, err)
	}
}

// A database that cannot be reached makes every call fail, soon, with an
// error that says so and does not show the password.
func TestPostgresDatabaseDown(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), downURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := idempotency.NewPostgres(pool)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	calls := map[string]func() error{
		"claim": func() error {
			r, err := s.Claim(ctx, "order-1")
			if r != 0 {
				t.Errorf("Claim = %v with the database down, want the zero result", r)
			}
			return err
		},
		"confirm": func() error { return s.Confirm(ctx, "order-1") },
		"cleanup": func() error { _, err := s.Cleanup(ctx); return err },
	}
	// Release needs no database for an id the store holds no claim on,
	// and with the database down it can hold none.
	if err := s.Release(ctx, "order-1"); err != nil {
		t.Errorf("Release of an id never claimed = %v, want nil without a round trip", err)
	}
	for name, call := range calls {
		err := call()
		switch {
		case err == nil:
			t.Errorf("%s: no error with the database down", name)
		case !strings.Contains(err.Error(), "acemq: idempotency "+name):
			t.Errorf("%s: %q does not say what failed", name, err)
		case !strings.Contains(err.Error(), "connect"):
			t.Errorf("%s: %q does not say the database could not be reached", name, err)
		case strings.Contains(err.Error(), "secret"):
			t.Errorf("%s: %q shows the password", name, err)
		}
	}
}

// A Release that reaches the database and fails says so. (With the
// database down a store can hold no claim, so it never gets that far.)
func TestPostgresReleaseError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgresPool(t, 0)
	s, table := newPostgres(t, pool)
	if r, err := s.Claim(ctx, "order-1"); r != idempotency.Claimed || err != nil {
		t.Fatalf("Claim = %v, %v", r, err)
	}
	if _, err := pool.Exec(ctx, "DROP TABLE "+table); err != nil {
		t.Fatal(err)
	}
	err := s.Release(ctx, "order-1")
	if err == nil || !strings.Contains(err.Error(), `acemq: idempotency release of "order-1"`) {
		t.Errorf("Release with the table gone = %v, want an error that says what failed", err)
	}
}

// downURL is a database that is not there: nothing listens on port 1.
const downURL = "postgres://acemq:secret@127.0.0.1:1/x?connect_timeout=1"

// BenchmarkPostgresClaimConfirm is what the store adds to a message handled
// for the first time: two statements, so two round trips to the database.
func BenchmarkPostgresClaimConfirm(b *testing.B) {
	ctx := context.Background()
	pool := postgresPool(b, 8)
	s, _ := newPostgres(b, pool)
	ids := uuids(1 << 16)
	// run is a prefix of one run of a sub-benchmark's own: with -count, the
	// runs share the table, and every claim must be of a new id.
	var runs atomic.Int64
	run := func() string { return strconv.FormatInt(runs.Add(1), 10) + "-" }
	b.Run("serial", func(b *testing.B) {
		prefix := run()
		i := 0
		for b.Loop() {
			id := prefix + ids[i%len(ids)]
			i++
			if r, err := s.Claim(ctx, id); err != nil || r != idempotency.Claimed {
				b.Fatalf("Claim = %v, %v", r, err)
			}
			if err := s.Confirm(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b)
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(4) // 8 goroutines on 2 cores, one connection each
		b.RunParallel(func(pb *testing.PB) {
			prefix := run()
			i := 0
			for pb.Next() {
				id := prefix + ids[i%len(ids)]
				i++
				if r, err := s.Claim(ctx, id); err != nil || r != idempotency.Claimed {
					b.Errorf("Claim = %v, %v", r, err)
					return
				}
				if err := s.Confirm(ctx, id); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b)
	})
}
