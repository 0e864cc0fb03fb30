package flow

import (
	"context"
	"errors"

	"github.com/acemq/acemq/ack"
)

// Outcome is what the engine tells a breaker about one delivery it let
// start.
type Outcome uint8

const (
	// Ignored says nothing about the dependency: the message's own fault
	// (fatal, rejected, parked, too old), a snooze, a handler cut off by
	// the stop, a delivery the broker took back. It fills no slot of the
	// window; in half-open it frees the probe's slot without a verdict.
	Ignored Outcome = iota
	// Success: the handler accepted the message.
	Success
	// Failure: the handler failed in a way the predicate counts against
	// the dependency.
	Failure
)

var outcomeNames = [...]string{"ignored", "success", "failure"}

// String returns the outcome's plain name.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(?)"
}

// ErrRequeued is the error [BreakerSettings.Counts] is asked about for an
// [ack.Requeue], which carries none: a handler that puts a message
// straight back usually does so because something it needs is not there.
var ErrRequeued = errors.New("acemq: the handler requeued the message")

// DefaultCounts is the predicate a breaker uses when its settings give
// none: every error a retry carries counts against the dependency, except
//
//   - an error marked [ack.Fatal]: the handler said retrying cannot fix
//     it, so it is the message's fault, not the dependency's;
//   - [context.Canceled]: the stop cut the handler off; a drain must not
//     trip a breaker.
//
// A deadline (context.DeadlineExceeded, the handler timeout) counts: a
// dependency that answers too slowly is one that is not answering.
func DefaultCounts(err error) bool {
	return !ack.IsFatal(err) && !errors.Is(err, context.Canceled)
}

// OutcomeOf turns a handler's answer into what the breaker is told.
// Only answers that ask for another try can count as failures, and only
// when counts says so: an [ack.Retry] or [ack.RetryAfter] with its error,
// an [ack.Requeue] with [ErrRequeued]. A dead letter, a park, a message
// too old and a missing answer are the message's fault by the handler's
// own word and never count; neither does a snooze (nothing failed). A nil
// counts is [DefaultCounts].
func OutcomeOf(a ack.Ack, counts func(error) bool) Outcome {
	if counts == nil {
		counts = DefaultCounts
	}
	switch a.Outcome() {
	case ack.OutcomeAccept:
		return Success
	case ack.OutcomeRetry:
		if counts(a.Err()) {
			return Failure
		}
	case ack.OutcomeRequeue:
		if counts(ErrRequeued) {
			return Failure
		}
	}
	return Ignored
}
