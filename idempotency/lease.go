package idempotency

import (
	"context"
	"time"
)

// LeaseReporter is a [Store] that can say how long the claim holding an
// id has left. middleware.Idempotent asks it when a Claim answers
// [InProgress], so that the message waits (a snooze, which spends no
// attempt) for just as long as the other claim can still hold the id,
// rather than spending its retry ladder on finding it held. [Memory] and
// [Postgres] are both LeaseReporters; a Store that is not one is waited
// out for [DefaultLease].
type LeaseReporter interface {
	Store
	// LeaseLeft returns how long the unsettled claim on id holds it
	// still, on the store's own clock (the database's, for [Postgres], so
	// that no two processes' clocks are compared). It is zero when no
	// unsettled claim holds id: it was confirmed, released, never claimed,
	// or its lease has ended. An empty id is [ErrEmptyID].
	LeaseLeft(ctx context.Context, id string) (time.Duration, error)
}

var (
	_ LeaseReporter = (*Memory)(nil)
	_ LeaseReporter = (*Postgres)(nil)
)
