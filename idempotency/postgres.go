package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is a [Store] in a PostgreSQL table, shared by every instance of a
// service and kept across restarts. Create the table with the statements
// [Postgres.CreateTableSQL] returns, in a migration; delete old rows with
// [Postgres.Cleanup] on a schedule.
//
// Used as a [Store] (behind the Idempotent middleware) it claims with a
// lease in one statement and confirms in another, after the handler's work
// has committed elsewhere: a crash between the two hands the message to the
// next consumer once the lease ends, so the work can run twice. Use
// [Postgres.ClaimTx] inside the handler's own transaction to close that gap.
// The two forms share a table but not an id: a message claimed by the
// middleware is refused by ClaimTx, so pick one per queue.
//
// The table's id column holds each id's [Key]: the id itself for the
// usual ones, a SHA-256 for ids that PostgreSQL could not index or store
// as text. Every call takes its id as a bound parameter, never as SQL.
type Postgres struct {
	pool      *pgxpool.Pool
	q         queries
	lease     int64 // microseconds
	retention int64 // microseconds
	now       func() time.Time
}

var _ Store = (*Postgres)(nil)

// NewPostgres returns a store on pool. It does no I/O: a missing table shows
// at the first claim. A nil pool, a lease or retention that is not positive,
// or a table name that [WithTable] does not allow is an error.
func NewPostgres(pool *pgxpool.Pool, opts ...PostgresOption) (*Postgres, error) {
	cfg := postgresConfig{shared: shared{lease: DefaultLease}, table: DefaultTable, retention: DefaultRetention}
	for _, o := range opts {
		o.applyPostgres(&cfg)
	}
	switch {
	case pool == nil:
		return nil, errors.New("acemq: idempotency.NewPostgres with a nil pool")
	case cfg.lease < time.Microsecond:
		return nil, fmt.Errorf("acemq: idempotency.NewPostgres with a lease of %s; it must be positive", cfg.lease)
	case cfg.retention < time.Microsecond:
		return nil, fmt.Errorf("acemq: idempotency.NewPostgres with a retention of %s; it must be positive", cfg.retention)
	}
	q, err := newQueries(cfg.table)
	if err != nil {
		return nil, err
	}
	return &Postgres{
		pool:      pool,
		q:         q,
		lease:     cfg.lease.Microseconds(),
		retention: cfg.retention.Microseconds(),
		now:       cfg.now,
	}, nil
}

// CreateTableSQL returns the statements that create the table and its
// indexes if they do not exist, for a migration. pgx runs them in one Exec
// call with no arguments.
func (s *Postgres) CreateTableSQL() string { return s.q.create }

// Claim implements [Store]: one INSERT ... ON CONFLICT DO UPDATE that takes
// a new id, or an id whose lease ended or whose retention passed, and
// refuses any other. PostgreSQL's row lock makes exactly one of several
// concurrent claimers win.
func (s *Postgres) Claim(ctx context.Context, id string) (bool, error) {
	key, err := Key(id)
	if err != nil {
		return false, err
	}
	ok, err := claimed(s.pool.QueryRow(ctx, s.q.claim, key, s.clock(), s.retention, s.lease))
	if err != nil {
		return false, fmt.Errorf("acemq: idempotency claim of %s: %w", quoteID(id), err)
	}
	return ok, nil
}

// ClaimTx claims id inside tx, already confirmed, so that the claim commits
// or rolls back with the handler's own work: the only arrangement where
// handled-once holds across crashes rather than nearly. False means the
// message was handled (the handler should accept it without doing the
// work); a concurrent transaction claiming the same id makes ClaimTx wait
// for it to end. Do not also Confirm or Release the id.
func (s *Postgres) ClaimTx(ctx context.Context, tx pgx.Tx, id string) (bool, error) {
	key, err := Key(id)
	if err != nil {
		return false, err
	}
	ok, err := claimed(tx.QueryRow(ctx, s.q.claimTx, key, s.clock(), s.retention))
	if err != nil {
		return false, fmt.Errorf("acemq: idempotency claim of %s in a transaction: %w", quoteID(id), err)
	}
	return ok, nil
}

// Confirm implements [Store]. It records id as handled even if its claim
// was lost meanwhile.
func (s *Postgres) Confirm(ctx context.Context, id string) error {
	key, err := Key(id)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.q.confirm, key, s.clock()); err != nil {
		return fmt.Errorf("acemq: idempotency confirm of %s: %w", quoteID(id), err)
	}
	return nil
}

// Release implements [Store]: it deletes the claim on id unless the id was
// confirmed.
func (s *Postgres) Release(ctx context.Context, id string) error {
	key, err := Key(id)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.q.release, key); err != nil {
		return fmt.Errorf("acemq: idempotency release of %s: %w", quoteID(id), err)
	}
	return nil
}

// Cleanup deletes the ids confirmed longer ago than the retention and the
// claims whose lease has ended, and returns how many rows went. Run it on a
// schedule (hourly is plenty): the store stays correct without it, only
// larger.
func (s *Postgres) Cleanup(ctx context.Context) (deleted int64, err error) {
	tag, err := s.pool.Exec(ctx, s.q.cleanup, s.clock(), s.retention)
	if err != nil {
		return 0, fmt.Errorf("acemq: idempotency cleanup: %w", err)
	}
	return tag.RowsAffected(), nil
}

// clock is the statement's time parameter: nil (SQL NULL, the database's
// now()) unless WithClock was given.
func (s *Postgres) clock() any {
	if s.now == nil {
		return nil
	}
	return s.now()
}

// claimed reads the RETURNING true of a claim: no row means refused.
func claimed(row pgx.Row) (bool, error) {
	var ok bool
	err := row.Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return ok, err
}
