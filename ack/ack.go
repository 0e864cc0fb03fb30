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
	// OutcomeNone is the zero Ack's: no answer. A middleware that forgot to
	// return its next handler's Ack returns it, and the server dead-letters
	// the message with a reason that says so, rather than acknowledge a
	// message nobody said was handled.
	OutcomeNone Outcome = iota
	// OutcomeAccept acknowledges the delivery.
	OutcomeAccept
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

var outcomeNames = [...]string{"none", "accept", "retry", "dead-letter", "park", "requeue"}

// String returns the outcome's plain name, the one metrics and logs use.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Ack is a handler's answer for one message. It is a small immutable value:
// compare it in tests with [Ack.Outcome], [Ack.Err] and [Ack.Reason]. The
// zero Ack is no answer ([OutcomeNone]), never an accept.
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

// TooOld gives up on a message older than maxAge, the limit a handler or
// middleware enforces (middleware.MaxAge does); the server writes the same
// reason when the retry policy's own maximum age is passed.
func TooOld(maxAge time.Duration, err error) Ack {
	err = orMissing(err)
	return Ack{outcome: OutcomeDeadLetter, err: err, reason: fmt.Sprintf("exceeded the maximum message age of %s: %s", maxAge, err), cause: "too_old"}
}

// Outcome returns what the server will do.
func (a Ack) Outcome() Outcome { return a.outcome }

// Err returns the error the handler gave, or nil for [Accept] and [Requeue].
func (a Ack) Err() error { return a.err }

// Reason returns the text written to x-acemq-error when the message is
// dead-lettered or parked, and "" for the other outcomes.
func (a Ack) Reason() string { return a.reason }

// Cause names plainly why the handler gave up on a message ("rejected",
// "too_old", "parked"), the outcome attribute of
// acemq.messages.dead.lettered.total; "" for the other outcomes. The server
// adds its own: "exhausted", "no_policy", "no_answer".
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
