package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
)

func claimTx(t *testing.T, pool *pgxpool.Pool, s *idempotency.Postgres, id string) (pgx.Tx, idempotency.ClaimResult) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	r, err := s.ClaimTx(ctx, tx, id)
	if err != nil {
		t.Fatal(err)
	}
	return tx, r
}

func TestPostgresClaimTx(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		commit bool
		later  idempotency.ClaimResult // what a later claim finds
	}{
		{"a committed claim is done", true, idempotency.Done},
		{"a rolled back claim is forgotten", false, idempotency.Claimed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
			s, _ := newPostgres(t, pool)
			tx, r := claimTx(t, pool, s, "a")
			if r != idempotency.Claimed {
				t.Fatalf("ClaimTx of a new id = %v", r)
			}
			end := tx.Rollback
			if tt.commit {
				end = tx.Commit
			}
			if err := end(ctx); err != nil {
				t.Fatal(err)
			}
			later, r := claimTx(t, pool, s, "a")
			if r != tt.later {
				t.Errorf("later ClaimTx = %v, want %v", r, tt.later)
			}
			_ = later.Rollback(ctx) // else the Claim below waits for it
			if r, err := s.Claim(ctx, "a"); r != tt.later || err != nil {
				t.Errorf("later Claim = %v, %v; want %v", r, err, tt.later)
			}
		})
	}
}

// A second transaction claiming the same id waits for the first, then
// follows its fate: done if it committed, claimed if it rolled back.
func TestPostgresClaimTxWaitsForTheOther(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "first commits", false: "first rolls back"}[commit]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 4})
			s, _ := newPostgres(t, pool)
			first, r := claimTx(t, pool, s, "a")
			if r != idempotency.Claimed {
				t.Fatalf("first ClaimTx = %v", r)
			}
			second, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer second.Rollback(ctx)
			var pid uint32
			if err := second.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			type result struct {
				r   idempotency.ClaimResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				r, err := s.ClaimTx(ctx, second, "a")
				done <- result{r, err}
			}()
			waitForLock(t, pool, pid)
			end := first.Rollback
			if commit {
				end = first.Commit
			}
			if err := end(ctx); err != nil {
				t.Fatal(err)
			}
			got := <-done
			if got.err != nil {
				t.Fatal(got.err)
			}
			want := map[bool]idempotency.ClaimResult{true: idempotency.Done, false: idempotency.Claimed}[commit]
			if got.r != want {
				t.Errorf("second ClaimTx = %v after the first ended with commit=%v, want %v", got.r, commit, want)
			}
		})
	}
}

// waitForLock returns once the backend pid is waiting on a lock.
func waitForLock(t *testing.T, pool *pgxpool.Pool, pid uint32) {
	t.Helper()
	polltest.Eventually(t, "the second transaction waits for the first", func() bool {
		var waiting bool
		err := pool.QueryRow(context.Background(),
			"SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		return waiting
	})
}

// ClaimTx meets the middleware's form of claim (which it should not, on
// one queue) as the other claimers do: a lease is in progress until it
// ends, a confirm is done.
func TestPostgresClaimTxAndLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
	clock := newFakeClock()
	s, _ := newPostgres(t, pool, idempotency.WithLease(time.Minute), idempotency.WithClock(clock))
	claim := func(id string) {
		t.Helper()
		if r, err := s.Claim(ctx, id); r != idempotency.Claimed || err != nil {
			t.Fatalf("Claim(%s) = %v, %v", id, r, err)
		}
	}
	claim("expired")
	claim("confirmed")
	if err := s.Confirm(ctx, "confirmed"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute) // the end of the lease of "expired"
	claim("held")
	for _, tt := range []struct {
		id   string
		want idempotency.ClaimResult
	}{
		{"held", idempotency.InProgress},
		{"confirmed", idempotency.Done},
		{"expired", idempotency.Claimed},
		{"new", idempotency.Claimed},
	} {
		tx, r := claimTx(t, pool, s, tt.id)
		if r != tt.want {
			t.Errorf("ClaimTx(%s) = %v, want %v", tt.id, r, tt.want)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The handler of the ClaimTx example, run for real: a delivery whose work
// fails leaves nothing behind, its retry does the work, and redeliveries
// after that do none.
func TestPostgresClaimTxHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
	s, _ := newPostgres(t, pool)
	orders := testTable()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+orders+" (message_id text NOT NULL, body bytea NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE "+orders) })

	failWork := true
	handle := func(ctx context.Context, m *acemq.Message) ack.Ack {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return ack.Retry(err)
		}
		defer tx.Rollback(ctx)
		switch r, err := s.ClaimTx(ctx, tx, m.ID()); {
		case err != nil:
			return ack.Retry(err)
		case r == idempotency.Done:
			return ack.Accept()
		case r != idempotency.Claimed:
			return ack.Retry(fmt.Errorf("%w: %s", idempotency.ErrInProgress, m.ID()))
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+orders+" VALUES ($1, $2)", m.ID(), m.Body()); err != nil {
			return ack.Retry(err)
		}
		if failWork {
			failWork = false
			return ack.Retry(errors.New("the warehouse said no")) // rolls back the claim with the work
		}
		if err := tx.Commit(ctx); err != nil {
			return ack.Retry(err)
		}
		return ack.Accept()
	}

	m := acemq.NewMessage("orders", []byte(`{"sku":"A-1"}`), map[string]any{acemq.HeaderID: "order-1"})
	var outcomes []string
	for range 4 {
		outcomes = append(outcomes, handle(ctx, m).Outcome().String())
	}
	if got := strings.Join(outcomes, " "); got != "retry accept accept accept" {
		t.Errorf("outcomes %s", got)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+orders).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d orders written for four deliveries of one message, want 1", n)
	}
}
