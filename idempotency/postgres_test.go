package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq/idempotency"
)

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
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 20}) // PostgreSQL allows 100 connections, and others share it
	runStoreSuite(t, func(t *testing.T, clock *fakeClock) idempotency.Store {
		s, _ := newPostgres(t, pool, idempotency.WithLease(suiteLease), idempotency.WithRetention(suiteRetention),
			idempotency.WithClock(clock))
		return s
	})
}

func TestPostgresDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
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
	polltest.Eventually(t, "the lease ended", func() bool {
		r, err := s.Claim(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if r != idempotency.Claimed && r != idempotency.InProgress {
			t.Fatalf("Claim of an unconfirmed id = %v", r)
		}
		return r == idempotency.Claimed
	})
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
	pools := []*pgxpool.Pool{brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 10}), brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 10})}
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

func TestPostgresCleanup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
	clock := newFakeClock()
	s, table := newPostgres(t, pool, idempotency.WithLease(time.Minute), idempotency.WithRetention(time.Hour),
		idempotency.WithClock(clock))
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
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
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
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
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
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
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

func BenchmarkPostgresClaimConfirm(b *testing.B) {
	ctx := context.Background()
	pool := brokertest.PostgresPool(b, brokertest.PoolConfig{MaxConns: 8})
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
