package idempotency

import (
	"context"
	"time"
)

// Store remembers which messages have been handled, keyed by the message's
// envelope id (acemq's x-acemq-id), which stays the same across retries,
// dead letters and replays.
//
// The three calls are one sequence for one delivery: Claim before the
// handler, then exactly one of Confirm (the handler accepted the message) or
// Release (anything else). Implementations are safe for concurrent use.
//
// Any id but the empty one works, whatever its length or bytes: the stores
// of this package file it under its [Key]. An empty id is [ErrEmptyID].
type Store interface {
	// Claim marks id as being handled and reports whether this caller won
	// it. False means the id is already handled, or being handled by someone
	// whose lease has not ended: the caller must not do the work. Of several
	// concurrent claims of one id, exactly one returns true.
	Claim(ctx context.Context, id string) (bool, error)
	// Confirm turns the claim on id into a record that the work is done, kept
	// for the store's retention window, so a later redelivery is refused at
	// Claim. Confirm records id even when the claim was lost (its lease ended
	// and it was cleaned up): the work was done either way.
	Confirm(ctx context.Context, id string) error
	// Release forgets an unconfirmed claim on id, so that the retry of a
	// failed attempt is not mistaken for a duplicate. Releasing an id that
	// was confirmed, or never claimed, does nothing.
	Release(ctx context.Context, id string) error
}

// Defaults shared by the stores.
const (
	// DefaultLease is how long a claim that is neither confirmed nor released
	// blocks other claims of its id. It should outlast the slowest handler:
	// a lease that ends while the handler still runs lets a redelivery run
	// the work a second time.
	DefaultLease = 5 * time.Minute
	// DefaultMaxEntries bounds a [Memory] store.
	DefaultMaxEntries = 100_000
	// DefaultRetention is how long a [Postgres] store remembers a confirmed
	// id unless [WithRetention] says otherwise.
	DefaultRetention = 7 * 24 * time.Hour
)
