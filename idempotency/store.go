package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store remembers which messages have been handled, keyed by the message's
// envelope id (acemq's x-acemq-id), which stays the same across retries,
// dead letters and replays.
//
// The three calls are one sequence for one delivery: Claim before the
// handler, then, if it answered [Claimed], exactly one of Confirm (the
// handler accepted the message) or Release (anything else).
// Implementations are safe for concurrent use.
//
// Any id but the empty one works, whatever its length or bytes: the stores
// of this package file it under its [Key]. An empty id is [ErrEmptyID].
type Store interface {
	// Claim takes id for the caller if no one holds it, and says what it
	// found: [Claimed] (do the work), [Done] (the work was done: do not do
	// it again) or [InProgress] (someone holds an unsettled claim whose
	// lease has not ended: the work is not done, so do not count the
	// message as handled; wait, and try again once that lease can have
	// ended: see [LeaseReporter]). Of several concurrent claims
	// of one id, exactly one is Claimed, and none is Done unless the id
	// was confirmed. A Claim that fails returns the zero ClaimResult,
	// which is none of the three, with the error.
	Claim(ctx context.Context, id string) (ClaimResult, error)
	// Confirm turns the claim on id into a record that the work is done, kept
	// for the store's retention window, so a later redelivery is Done at
	// Claim. Confirm records id even when the claim was lost (its lease ended
	// and it was cleaned up): the work was done either way.
	Confirm(ctx context.Context, id string) error
	// Release forgets an unconfirmed claim on id, so that the retry of a
	// failed attempt is not mistaken for one in progress. Releasing an id
	// that was confirmed, or never claimed, does nothing. Nor does a
	// Release whose claim's lease ended and was taken over by another: that
	// claim's work may be running, and freeing the id would let a third
	// run it again at the same time. A store errs towards holding the id
	// until a lease ends, never towards freeing a claim that is not the
	// caller's.
	Release(ctx context.Context, id string) error
}

// ClaimResult is what [Store.Claim] found. The two refusals are kept apart
// because they call for opposite answers: a message whose work is done is
// accepted, while one whose work is in progress elsewhere must not be,
// since that work may yet fail, or may never end because its consumer died
// mid-handler. Taking both for "done" loses the second kind of message.
type ClaimResult uint8

// The results of a claim. The zero value is none of them: it is what a
// failed Claim returns beside its error.
const (
	// Claimed: the id was free (never claimed, released, its lease ended,
	// or its retention passed) and is now the caller's, for the lease. Do
	// the work, then Confirm or Release the id.
	Claimed ClaimResult = iota + 1
	// Done: the id was confirmed within the retention. The work is done:
	// accept the message without doing it again.
	Done
	// InProgress: the id is claimed, neither confirmed nor released, and
	// its lease has not ended. Its work may be running in another consumer,
	// or may have died with one; either way it is not done. Do not accept
	// the message and do not do the work now: try again once the other
	// claim can have been confirmed (Done), released or run out its lease
	// (Claimed). middleware.Idempotent snoozes the message until that lease
	// can have ended, which spends no attempt.
	InProgress
)

var claimResultNames = [...]string{Claimed: "claimed", Done: "done", InProgress: "in progress"}

// String returns "claimed", "done" or "in progress".
func (r ClaimResult) String() string {
	if r != 0 && int(r) < len(claimResultNames) {
		return claimResultNames[r]
	}
	return fmt.Sprintf("ClaimResult(%d)", uint8(r))
}

// ErrInProgress is the error of a message that was not handled because its
// id is [InProgress] and stayed so. middleware.Idempotent first snoozes
// such a message until the other claim's lease can have ended, which
// spends no attempt; only one found in progress after its snoozes (a claim
// that live consumers keep taking) is retried with this error, wrapped
// with the id, under the retry ladder. One that finds its id in progress
// on every attempt then is dead-lettered with a reason that reads
// "exhausted N attempts: acemq: idempotency: message in progress
// elsewhere: ...": it is not lost, and it can be replayed once the claim is
// gone.
var ErrInProgress = errors.New("acemq: idempotency: message in progress elsewhere")

// Defaults shared by the stores.
const (
	// DefaultLease is how long a claim that is neither confirmed nor
	// released holds its id: see [WithLease] for the trade-off. A minute
	// outlasts the handlers a message queue is meant for (the server's own
	// shutdown wait is 20 s), and it is how long a message held by a claim
	// whose consumer crashed waits, at most, before it is handled.
	DefaultLease = time.Minute
	// DefaultMaxEntries bounds a [Memory] store.
	DefaultMaxEntries = 100_000
	// DefaultRetention is how long a [Postgres] store remembers a confirmed
	// id unless [WithRetention] says otherwise.
	DefaultRetention = 7 * 24 * time.Hour
)
