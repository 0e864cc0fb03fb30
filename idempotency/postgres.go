package idempotency

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
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
// has committed elsewhere: a crash between the two leaves the id
// [InProgress] until the lease ends, then hands it to the next consumer,
// so the work can run twice. Use [Postgres.ClaimTx] inside the handler's
// own transaction to close that gap. The two forms share a table but not
// an id: a message claimed by the middleware is InProgress to ClaimTx
// until its lease ends, so pick one form per queue.
//
// The table's id column holds each id's [Key]: the id itself for the
// usual ones, a SHA-256 for ids that PostgreSQL could not index or store
// as text. Every call takes its id as a bound parameter, never as SQL. Its
// owner column marks each claim with a random token of the store that
// made it, so that a Release deletes only its own store's claim: see
// [Postgres.Release].
type Postgres struct {
	pool      *pgxpool.Pool
	q         queries
	lease     int64 // microseconds
	retention int64 // microseconds
	now       func() time.Time
	owner     string // this store's token in the owner column of its claims

	mu sync.Mutex
	// held counts, by key, the claims this store made that are neither
	// confirmed nor released. A claim never settled (a caller that breaks
	// the Store contract, or a handler that never returns) leaves its key
	// here until the id is confirmed, which may be never: a few dozen bytes
	// each, and until then a Release of that id leaves it to its lease, the
	// safe direction. Expiring entries by age would be wrong: a claimer
	// past its lease is exactly the one whose late Release must not free
	// the claim that took over.
	held map[string]int
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
		owner:     rand.Text(),
		held:      make(map[string]int),
	}, nil
}

// CreateTableSQL returns the statements that create the table and its
// indexes if they do not exist, for a migration. pgx runs them in one Exec
// call with no arguments. They also bring a table made by an older
// version up to date, by adding its owner column if it lacks one: run
// them again before deploying a version that has it, or every claim fails
// on the missing column. Rows the older version claimed keep their leases
// and can no longer be released, only outlived.
func (s *Postgres) CreateTableSQL() string { return s.q.create }

// Claim implements [Store]. One INSERT ... ON CONFLICT DO UPDATE takes a
// new id, or one whose lease ended or whose retention passed, and refuses
// any other; PostgreSQL's row lock makes exactly one of several concurrent
// claimers win. A refused claim then reads the row, in a second statement,
// to tell [Done] from [InProgress]. Not in the same statement: a read there
// (a CTE) sees the statement's snapshot, which misses a row that a
// concurrent claimer committed while this one waited on it, and that is
// exactly the row that refused it. Should the row change between the two
// statements (released, or its lease ending), the claim is tried again; an
// id that changes hands under every try is InProgress, never Done. A claim
// that wins costs one round trip, a refused one two.
func (s *Postgres) Claim(ctx context.Context, id string) (ClaimResult, error) {
	key, err := Key(id)
	if err != nil {
		return 0, err
	}
	r, err := s.claim(ctx, s.pool, s.q.claim, key, true)
	if err != nil {
		return 0, fmt.Errorf("acemq: idempotency claim of %s: %w", quoteID(id), err)
	}
	if r == Claimed {
		s.mu.Lock()
		s.held[key]++
		s.mu.Unlock()
	}
	return r, nil
}

// ClaimTx claims id inside tx, already confirmed, so that the claim commits
// or rolls back with the handler's own work: the only arrangement where
// handled-once holds across crashes rather than nearly.
//
//   - [Claimed]: do the work and commit.
//   - [Done]: the work was committed before: accept the message without
//     doing it.
//   - [InProgress]: a claim of the middleware's form ([Postgres.Claim])
//     holds the id with a lease, which means the two forms were mixed on
//     one queue. Retry the message; accepting it would lose it if that
//     claim's consumer died.
//
// A concurrent transaction claiming the same id makes ClaimTx wait for it
// to end, then follow its fate: Done if it committed, Claimed if it rolled
// back. So two ClaimTx never see each other in progress. Do not also
// Confirm or Release the id.
func (s *Postgres) ClaimTx(ctx context.Context, tx pgx.Tx, id string) (ClaimResult, error) {
	key, err := Key(id)
	if err != nil {
		return 0, err
	}
	r, err := s.claim(ctx, tx, s.q.claimTx, key, false)
	if err != nil {
		return 0, fmt.Errorf("acemq: idempotency claim of %s in a transaction: %w", quoteID(id), err)
	}
	return r, nil
}

// claimRounds bounds how often claim tries again when the row that refused
// it changed before it could be read.
const claimRounds = 3

// querier is what claim runs on: the pool, or the handler's transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// claim runs the claim statement sql on q and, when it is refused, reads
// the row that refused it. The claim statements take $1 id, $2 clock, $3
// retention and, with a lease, $4 lease and $5 owner.
func (s *Postgres) claim(ctx context.Context, q querier, sql, key string, withLease bool) (ClaimResult, error) {
	for range claimRounds {
		now := s.clock()
		args := []any{key, now, s.retention, s.lease, s.owner}
		if !withLease {
			args = args[:3]
		}
		won, err := claimed(q.QueryRow(ctx, sql, args...))
		if err != nil {
			return 0, err
		}
		if won {
			return Claimed, nil
		}
		var confirmed, holds bool
		err = q.QueryRow(ctx, s.q.state, key, now, s.retention).Scan(&confirmed, &holds)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue // released since: claim again
		case err != nil:
			return 0, err
		case !holds:
			continue // its lease or retention ended since: claim again
		case confirmed:
			return Done, nil
		}
		return InProgress, nil
	}
	// Claimed and released by others between every two statements: the id
	// is being worked on, and not done.
	return InProgress, nil
}

// LeaseLeft implements [LeaseReporter]: how long the unconfirmed claim on
// id holds it still, by the database's clock (or the [WithClock] one), or
// zero when none does. One round trip, asked only of an id found
// [InProgress].
func (s *Postgres) LeaseLeft(ctx context.Context, id string) (time.Duration, error) {
	key, err := Key(id)
	if err != nil {
		return 0, err
	}
	var us int64
	err = s.pool.QueryRow(ctx, s.q.leaseLeft, key, s.clock()).Scan(&us)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("acemq: idempotency lease of %s: %w", quoteID(id), err)
	}
	return time.Duration(max(us, 0)) * time.Microsecond, nil
}

// Confirm implements [Store]. It records id as handled even if its claim
// was lost meanwhile. It settles every claim of id this store holds: the
// work is done, so none of them has anything left to release.
func (s *Postgres) Confirm(ctx context.Context, id string) error {
	key, err := Key(id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.held, key)
	s.mu.Unlock()
	if _, err := s.pool.Exec(ctx, s.q.confirm, key, s.clock()); err != nil {
		return fmt.Errorf("acemq: idempotency confirm of %s: %w", quoteID(id), err)
	}
	return nil
}

// Release implements [Store]: it deletes the claim on id if that claim is
// still this store's and unconfirmed. A claim whose lease ended may have
// been taken over by another instance, whose work is running: its row
// carries that instance's owner, and stays.
//
// The calls carry only the id, so one store cannot tell its own claimers of
// an id apart. While two of them are unsettled (one whose lease ended and
// one that took over from it) a Release cannot know whose claim it ends,
// and frees nothing: the id stays held until the newer lease ends, or the
// last of them is released or the id confirmed. A Release of an id this
// store holds no claim on does nothing, without a round trip.
func (s *Postgres) Release(ctx context.Context, id string) error {
	key, err := Key(id)
	if err != nil {
		return err
	}
	if !s.settle(key) {
		return nil
	}
	if _, err := s.pool.Exec(ctx, s.q.release, key, s.owner); err != nil {
		return fmt.Errorf("acemq: idempotency release of %s: %w", quoteID(id), err)
	}
	return nil
}

// settle counts one claim of key as settled and reports whether it was the
// only one this store held.
func (s *Postgres) settle(key string) (last bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch n := s.held[key]; n {
	case 0:
		return false
	case 1:
		delete(s.held, key)
		return true
	default:
		s.held[key] = n - 1
		return false
	}
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
