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
	// OutcomeSnooze puts the message off for a while without spending an
	// attempt: a wait the handler chose, bounded by the policy's maximum
	// age and its limit on snoozes.
	OutcomeSnooze
)

var outcomeNames = [...]string{"none", "accept", "retry", "dead-letter", "park", "requeue", "snooze"}

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
	after   time.Duration // the handler's own wait, for RetryAfter and Snooze
	chosen  bool          // after was chosen by the handler, not the policy
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

// RetryAfter asks for another attempt after d, a wait the handler chose (a
// 429's Retry-After, a partner's maintenance window) instead of the
// policy's. It spends an attempt like [Retry] and stays bounded by the
// policy's maximum attempts and age: a wait that would bring the message
// back past its maximum age gives up on it now. A wait at or over the
// policy's broker-wait threshold is spent on the delay queues (package
// delay), where it holds no consumer; a shorter one in the process. A
// wait longer than the delay queues carry (delay.Max, about 388 days)
// dead-letters the message. A negative d is zero: the next attempt at once.
// [RetryAfterHeader] takes d from a response's Retry-After.
func RetryAfter(d time.Duration, err error) Ack {
	a := Retry(err)
	a.after, a.chosen = max(d, 0), true
	return a
}

// Snooze puts the message off for d without spending an attempt, like
// river's JobSnooze: for a message that is not failing but not yet ready
// (an order waiting on a payment). The policy's maximum age bounds it, and
// so does its limit on snoozes (retry.Policy.WithMaxSnoozes), so that a
// handler that always snoozes cannot keep a message forever: past either,
// the message is dead-lettered with a reason that says which. Waits are
// spent where [RetryAfter]'s are. A negative d is zero.
func Snooze(d time.Duration) Ack {
	return Ack{outcome: OutcomeSnooze, after: max(d, 0), chosen: true}
}

// DeadLetter gives up on the message now, skipping the ladder: for a failure
// that retrying cannot fix ("no such customer"). The reason is required
// because it is what a person reading the dead-letter queue works from; a nil
// err is replaced by one that says none was given.
func DeadLetter(err error) Ack {
	err = orMissing(err)
	return Ack{outcome: OutcomeDeadLetter, err: err, reason: "the handler rejected it: " + err.Error(), cause: "rejected"}
}

// Park sets aside a message this consumer cannot use, for a person to look
// at (a schema the handler was never taught, an event for a tenant this
// deployment does not serve), with the reason "the handler parked it: "
// and err: what the handler said, as [DeadLetter] writes "the handler
// rejected it: ". Parked messages are kept apart from dead letters, in
// "{queue}.parked". A body the codec refuses is [Undecodable] instead. A
// nil err is replaced by one that says none was given.
func Park(err error) Ack {
	err = orMissing(err)
	return Ack{outcome: OutcomePark, err: err, reason: "the handler parked it: " + err.Error(), cause: "parked"}
}

// Undecodable parks a message whose body could not be decoded, with the
// reason "could not be decoded: " and err, the codec's error: what
// middleware.Decode and acemq.Decoded answer for a body their codec
// refuses, and what a handler that decodes a body itself answers when it
// cannot. The message goes where [Park] puts it, counted the same way
// (parked); only the reason differs, so that a reader of "{queue}.parked"
// tells a producer's unreadable bytes from a handler's choice.
func Undecodable(err error) Ack {
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

// After returns the wait the handler chose with [RetryAfter] or [Snooze],
// and whether it chose one; a [Retry] leaves the wait to the policy.
func (a Ack) After() (time.Duration, bool) { return a.after, a.chosen }

// Err returns the error the handler gave, or nil for [Accept] and [Requeue].
func (a Ack) Err() error { return a.err }

// Reason returns the text written to x-acemq-error when the message is
// dead-lettered or parked, and "" for the other outcomes.
func (a Ack) Reason() string { return a.reason }

// Cause names plainly why the handler gave up on a message ("rejected",
// "too_old", "parked"), the outcome attribute of
// acemq.messages.dead.lettered.total; "" for the other outcomes. The server
// adds its own: "exhausted", "no_policy", "no_answer", "snooze_limit" and
// "wait_too_long" (a wait over the delay queues' longest, about 388 days).
func (a Ack) Cause() string { return a.cause }

// String reads like the outcome and its reason, for logs and test failures.
func (a Ack) String() string {
	switch {
	case a.reason != "":
		return a.outcome.String() + ": " + a.reason
	case a.chosen && a.err != nil:
		return fmt.Sprintf("%s after %s: %s", a.outcome, a.after, a.err)
	case a.chosen:
		return fmt.Sprintf("%s for %s", a.outcome, a.after)
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
