package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
)

func claimTx(t *testing.T, pool *pgxpool.Pool, s *idempotency.Postgres, id string) (pgx.Tx, bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	ok, err := s.ClaimTx(ctx, tx, id)
	if err != nil {
		t.Fatal(err)
	}
	return tx, ok
}

func TestPostgresClaimTx(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		commit  bool
		wantWon bool // whether a later claim wins
	}{
		{"committed claim refuses later claims", true, false},
		{"rolled back claim is forgotten", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := postgresPool(t, 0)
			s, _ := newPostgres(t, pool)
			tx, ok := claimTx(t, pool, s, "a")
			if !ok {
				t.Fatal("ClaimTx of a new id refused")
			}
			end := tx.Rollback
			if tt.commit {
				end = tx.Commit
			}
			if err := end(ctx); err != nil {
				t.Fatal(err)
			}
			later, ok := claimTx(t, pool, s, "a")
			if ok != tt.wantWon {
				t.Errorf("later ClaimTx = %v, want %v", ok, tt.wantWon)
			}
			_ = later.Rollback(ctx) // else the Claim below waits for it
			if ok, err := s.Claim(ctx, "a"); ok != tt.wantWon || err != nil {
				t.Errorf("later Claim = %v, %v; want %v", ok, err, tt.wantWon)
			}
		})
	}
}

// A second transaction claiming the same id waits for the first, then
// follows its fate: refused if it committed, winning if it rolled back.
func TestPostgresClaimTxWaitsForTheOther(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "first commits", false: "first rolls back"}[commit]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := postgresPool(t, 4)
			s, _ := newPostgres(t, pool)
			first, ok := claimTx(t, pool, s, "a")
			if !ok {
				t.Fatal("first ClaimTx refused")
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
				ok  bool
				err error
			}
			done := make(chan result, 1)
			go func() {
				ok, err := s.ClaimTx(ctx, second, "a")
				done <- result{ok, err}
			}()
			waitForLock(t, pool, pid)
			end := first.Rollback
			if commit {
				end = first.Commit
			}
			if err := end(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.ok == commit {
				t.Errorf("second ClaimTx = %v after the first ended with commit=%v", r.ok, commit)
			}
		})
	}
}

// waitForLock returns once the backend pid is waiting on a lock.
func waitForLock(t *testing.T, pool *pgxpool.Pool, pid uint32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var waiting bool
		err := pool.QueryRow(context.Background(),
			"SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the second transaction never waited for the first")
}

func TestPostgresClaimTxRefusesAnUnsettledClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgresPool(t, 0)
	s, _ := newPostgres(t, pool)
	if ok, err := s.Claim(ctx, "a"); !ok || err != nil {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	if _, ok := claimTx(t, pool, s, "a"); ok {
		t.Error("ClaimTx won an id another consumer holds a lease on")
	}
}

// The handler of the ClaimTx example, run for real: a delivery whose work
// fails leaves nothing behind, its retry does the work, and redeliveries
// after that do none.
func TestPostgresClaimTxHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := postgresPool(t, 0)
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
		first, err := s.ClaimTx(ctx, tx, m.ID())
		if err != nil {
			return ack.Retry(err)
		}
		if !first {
			return ack.Accept()
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
