package brokertest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/tbtest"
)

// A pool that cannot connect fails the test naming the server, never its
// password.
func TestOpenPoolRefusedHidesThePassword(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"postgres://app:hunter2@127.0.0.1:1/none?connect_timeout=1",
		"postgres://app:hunter2@127.0.0.1:notaport/none",
	} {
		failed := tbtest.Failure(t, func(tb testing.TB) { brokertest.OpenPool(tb, url, brokertest.PoolConfig{}) })
		if failed == "" {
			t.Fatalf("OpenPool(%s) did not fail", url)
		}
		if strings.Contains(failed, "hunter2") {
			t.Errorf("OpenPool(%s) failed showing the password: %s", url, failed)
		}
		if !strings.Contains(failed, "127.0.0.1") {
			t.Errorf("OpenPool(%s) failed with %q, want the server named", url, failed)
		}
	}
}

// The pool's connections carry the test's settings.
func TestPostgresPoolConfig(t *testing.T) {
	t.Parallel()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 3, AppName: "brokertest-pool"})
	if got := pool.Config().MaxConns; got != 3 {
		t.Errorf("MaxConns = %d, want 3", got)
	}
	var app string
	if err := pool.QueryRow(context.Background(), "SELECT current_setting('application_name')").Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != "brokertest-pool" {
		t.Errorf("application_name = %q, want brokertest-pool", app)
	}
}

// The refused pool is made without a database and fails its first query,
// saying so without the password.
func TestRefusedPool(t *testing.T) {
	t.Parallel()
	pool := brokertest.RefusedPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := pool.Ping(ctx)
	if err == nil {
		t.Fatal("Ping on the refused pool succeeded")
	}
	if !strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "secret") {
		t.Errorf("Ping = %v, want it to name the server and not the password", err)
	}
}
