package middleware_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/brokertest"
)

// forEachStore runs test on a fresh memory store, and on a fresh
// PostgreSQL store when ACEMQ_POSTGRES_URL is set.
func forEachStore(t *testing.T, test func(t *testing.T, store idempotency.Store)) {
	t.Helper()
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			test(t, storeOf(t, kind))
		})
	}
}

// storeOf is a fresh store of kind ("memory" or "postgres") with opts.
func storeOf(t *testing.T, kind string, opts ...idempotency.Option) idempotency.Store {
	t.Helper()
	if kind == "memory" {
		memOpts := make([]idempotency.MemoryOption, len(opts))
		for i, o := range opts {
			memOpts[i] = o
		}
		return idempotency.NewMemory(time.Hour, memOpts...)
	}
	pgOpts := make([]idempotency.PostgresOption, len(opts))
	for i, o := range opts {
		pgOpts[i] = o
	}
	return postgresStore(t, pgOpts...)
}

// postgresStore is a store on a table of its own in ACEMQ_POSTGRES_URL,
// dropped when the test ends. It skips without the variable, except under
// CI, where a missing database fails the test.
func postgresStore(tb testing.TB, opts ...idempotency.PostgresOption) *idempotency.Postgres {
	tb.Helper()
	pool := brokertest.PostgresPool(tb, brokertest.PoolConfig{MaxConns: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	table := fmt.Sprintf("idem_mw_%016x", rand.Uint64())
	store, err := idempotency.NewPostgres(pool, append(opts, idempotency.WithTable(table))...)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, store.CreateTableSQL()); err != nil {
		tb.Fatalf("create %s: %v", table, err)
	}
	tb.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP TABLE "+table); err != nil {
			tb.Errorf("drop %s (the odd ids must not have dropped it): %v", table, err)
		}
	})
	return store
}
