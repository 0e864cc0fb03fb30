package idempotency_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/brokertest"
)

// A database that cannot be reached makes every call fail, soon, with an
// error that says so and does not show the password.
func TestPostgresDatabaseDown(t *testing.T) {
	t.Parallel()
	pool := brokertest.RefusedPool(t)
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
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
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

// BenchmarkPostgresClaimConfirm is what the store adds to a message handled
// for the first time: two statements, so two round trips to the database.
