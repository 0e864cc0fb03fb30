package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq/internal/redact"
)

// PoolConfig is what a test may set on the pool it opens; the zero value is
// pgx's defaults.
type PoolConfig struct {
	// MaxConns caps the pool (0 is pgx's default), for a test that needs
	// connections to run out or to be few.
	MaxConns int32
	// AppName is the application_name the connections show in
	// pg_stat_activity, so that a test can find and kill exactly its own.
	AppName string
}

// PostgresPool opens a pool on ACEMQ_POSTGRES_URL, the run's throwaway
// database, gated like PostgresURL (skipped without it unless CI is set),
// and closes it when the test ends. It is every integration test's way to
// PostgreSQL, so that a test does not write the connection again.
func PostgresPool(tb testing.TB, cfg PoolConfig) *pgxpool.Pool {
	tb.Helper()
	return OpenPool(tb, PostgresURL(tb), cfg)
}

// OpenPool opens a pool on url, for a server the test names itself (a
// private one from StartPostgres, the URL a fault scenario's child was
// given), waits until it answers, and closes it when the test ends. A
// failure fails the test with the URL's password hidden.
func OpenPool(tb testing.TB, url string, cfg PoolConfig) *pgxpool.Pool {
	tb.Helper()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatalf("PostgreSQL URL %s: %s", redact.URL(url), redact.Error(err, url))
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	if cfg.AppName != "" {
		pc.ConnConfig.RuntimeParams["application_name"] = cfg.AppName
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		tb.Fatalf("connect to %s: %s", redact.URL(url), redact.Error(err, url))
	}
	tb.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		tb.Fatalf("connect to %s: %s", redact.URL(url), redact.Error(err, url))
	}
	return pool
}

// RefusedURL is a PostgreSQL URL on which nothing listens (port 1 of
// 127.0.0.1), with the password "secret": for a test of a database that is
// down, whose errors must say why and never show the password.
const RefusedURL = "postgres://acemq:secret@127.0.0.1:1/x?connect_timeout=1"

// RefusedPool is a pool on RefusedURL, closed when the test ends. pgxpool
// connects lazily, so it never connects: a constructor's settings can be
// checked on it without a database, and every query fails as against a
// database that is down.
func RefusedPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), RefusedURL)
	if err != nil {
		tb.Fatalf("a pool on %s: %s", redact.URL(RefusedURL), redact.Error(err, RefusedURL))
	}
	tb.Cleanup(pool.Close)
	return pool
}
