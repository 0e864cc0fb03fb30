package ack

import (
	"errors"
	"fmt"
	"time"
)

// Outcome says what the server does with a message once its handler returned.
type Outcome uint8

// The outcomes, in the order a reader meets them in the package doc.
const (
	// OutcomeAccept acknowledges the delivery.
	OutcomeAccept Outcome = iota
	// OutcomeRetry republishes the message with its attempt raised, after the
	// wait the retry policy gives.
	OutcomeRetry
	// OutcomeDeadLetter publishes the message to "{queue}.dlq" with a reason.
	OutcomeDeadLetter
	// OutcomePark publishes the message to "{queue}.parked" with a reason.
	OutcomePark
	// OutcomeRequeue rejects the delivery with requeue: no delay, no limit.
	OutcomeRequeue
)

var outcomeNames = [...]string{"accept", "retry", "dead-letter", "park", "requeue"}

// String returns the outcome's plain name, the one metrics and logs use.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Ack is a handler's answer for one message. It is a small immutable value:
// compare it in tests with [Ack.Outcome], [Ack.Err] and [Ack.Reason].
type Ack struct {
	outcome Outcome
	err     error
	reason  string
	cause   string
}

// Accept says the message was handled.
func Accept() Ack { return Ack{outcome: OutcomeAccept} }

// Retry asks for another attempt after the policy's wait. err is what went
// wrong; it ends up in the reason if the message is given up on. A [Fatal]
// err skips the attempts that are left.
func Retry(err error) Ack {
	if err == nil {
		err = errRetryWithoutError
	}
	return Ack{outcome: OutcomeRetry, err: err}
}

// DeadLetter gives up on the message now, skipping the ladder: for a failure
// that retrying cannot fix ("no such customer"). The reason is required
// because it is what a person reading the dead-letter queue works from; a nil
// err is replaced by one that says none was given.
func DeadLetter(err error) Ack {
	err = orMissing(err)
	return Ack{outcome: OutcomeDeadLetter, err: err, reason: "the handler rejected it: " + err.Error(), cause: "rejected"}
}

// Park sets aside a message that cannot be read (a body the codec refuses, a
// schema the handler was never taught). Parked messages are kept apart from
// dead letters, in "{queue}.parked".
func Park(err error) Ack {
	err = orMissing(err)
	return Ack{outcome: OutcomePark, err: err, reason: "could not be decoded: " + err.Error(), cause: "parked"}
}

// Requeue puts the delivery straight back on its queue, with no delay and no
// attempt limit. A message that always fails becomes a loop that holds a
// consumer for as long as the process runs; prefer [Retry] unless the failure
// is obviously transient and the queue obviously short.
func Requeue() Ack { return Ack{outcome: OutcomeRequeue} }

// Exhausted is the dead letter the server sends when a message used every
// attempt its policy allows.
func Exhausted(attempts int, err error) Ack {
	err = orMissing(err)
	return Ack{outcome: OutcomeDeadLetter, err: err, reason: fmt.Sprintf("exhausted %d attempts: %s", attempts, err), cause: "exhausted"}
}

// TooOld is the dead letter for a message older than the maximum message age.
func TooOld(maxAge time.Duration, err error) Ack {
	err = orMissing(err)
	return Ack{outcome: OutcomeDeadLetter, err: err, reason: fmt.Sprintf("exceeded the maximum message age of %s: %s", maxAge, err), cause: "too_old"}
}

// NoPolicy is the dead letter for a retry asked for on a queue with no retry
// policy. The default is one delivery; the reason says so, which is louder
// than the alternative default of an immediate requeue.
func NoPolicy(err error) Ack {
	err = orMissing(err)
	return Ack{outcome: OutcomeDeadLetter, err: err, reason: "retry requested but no retry policy is set, so one delivery is all it gets: " + err.Error(), cause: "no_policy"}
}

// Outcome returns what the server will do.
func (a Ack) Outcome() Outcome { return a.outcome }

// Err returns the error the handler gave, or nil for [Accept] and [Requeue].
func (a Ack) Err() error { return a.err }

// Reason returns the text written to x-acemq-error when the message is
// dead-lettered or parked, and "" for the other outcomes.
func (a Ack) Reason() string { return a.reason }

// Cause names plainly why a message was given up on ("rejected",
// "exhausted", "too_old", "no_policy", "parked"), the outcome attribute of
// acemq.messages.dead.lettered.total; "" for the other outcomes.
func (a Ack) Cause() string { return a.cause }

// String reads like the outcome and its reason, for logs and test failures.
func (a Ack) String() string {
	switch {
	case a.reason != "":
		return a.outcome.String() + ": " + a.reason
	case a.err != nil:
		return a.outcome.String() + ": " + a.err.Error()
	}
	return a.outcome.String()
}

var (
	errRetryWithoutError = errors.New("acemq: retry requested without an error")
	errNoReason          = errors.New("acemq: no reason given")
)

func orMissing(err error) error {
	if err == nil {
		return errNoReason
	}
	return err
}
