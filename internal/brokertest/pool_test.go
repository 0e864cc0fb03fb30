package brokertest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
)

// recorder is a testing.TB that keeps what Fatalf said and ends its
// goroutine as testing.T's does, running cleanups at once.
type recorder struct {
	testing.TB
	failed   string
	cleanups []func()
}

func (r *recorder) Helper()          {}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func failure(f func(tb testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	for _, c := range r.cleanups {
		c()
	}
	return r.failed
}

// A pool that cannot connect fails the test naming the server, never its
// password.
func TestOpenPoolRefusedHidesThePassword(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"postgres://app:hunter2@127.0.0.1:1/none?connect_timeout=1",
		"postgres://app:hunter2@127.0.0.1:notaport/none",
	} {
		failed := failure(func(tb testing.TB) { brokertest.OpenPool(tb, url, brokertest.PoolConfig{}) })
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
