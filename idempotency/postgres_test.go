package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq/idempotency"
)

// postgresPool connects to ACEMQ_POSTGRES_URL and closes the pool when the
// test ends. The test skips when the variable is unset, except under CI,
// where a missing database is a failure rather than a silent pass.
func postgresPool(tb testing.TB, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	raw := os.Getenv("ACEMQ_POSTGRES_URL")
	if raw == "" {
		if os.Getenv("CI") != "" {
			tb.Fatal("ACEMQ_POSTGRES_URL is not set; under CI the PostgreSQL tests may not skip")
		}
		tb.Skip("ACEMQ_POSTGRES_URL is not set")
	}
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
	pool := postgresPool(t, 60)
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
	s, _ := newPostgres(t, pool, idempotency.WithLease(100*time.Millisecond))
	if ok, err := s.Claim(ctx, "a"); !ok || err != nil {
		t.Fatalf("first Claim = %v, %v", ok, err)
	}
	if ok, err := s.Claim(ctx, "a"); ok || err != nil {
		t.Fatalf("second Claim = %v, %v; want refused", ok, err)
	}
	// The database's own clock ends the lease; poll rather than guess.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, err := s.Claim(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Confirm(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // longer than the lease, far shorter than retention
	if ok, err := s.Claim(ctx, "a"); ok || err != nil {
		t.Fatalf("Claim after Confirm = %v, %v; want refused", ok, err)
	}
}

// Two pools stand for two instances of a service: the claim is decided by
// the database, not by anything either process holds.
func TestPostgresConcurrentClaimsAcrossPools(t *testing.T) {
	t.Parallel()
	pools := []*pgxpool.Pool{postgresPool(t, 25), postgresPool(t, 25)}
	first, table := newPostgres(t, pools[0])
	second, err := idempotency.NewPostgres(pools[1], idempotency.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	stores := []*idempotency.Postgres{first, second}
	for round := range 10 {
		id := fmt.Sprint("race-", round)
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range 50 {
			wg.Go(func() {
				<-start
				ok, err := stores[g%2].Claim(context.Background(), id)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("%s: %d of 50 claims across two pools won, want exactly 1", id, n)
		}
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
	if ok, err := s.Claim(ctx, "a"); !ok || err != nil {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
}
