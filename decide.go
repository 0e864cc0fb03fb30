package acemq

import (
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// verdict is what becomes of one delivery once its handler has answered:
// a value, decided without I/O, that the executor (settle.go) carries out.
type verdict struct {
	settle settlement
	// copy is the message to publish before the original is settled; only
	// for settleCopy.
	copy hop
	// cause names why the message was given up on ("exhausted", "parked",
	// ...): the outcome of acemq.messages.dead.lettered.total once the copy
	// is safe. Empty for a retry.
	cause string
	// where is where a retry waits ("process", "broker"): the attribute of
	// acemq.retry.scheduled. Empty for a give-up.
	where string
	// stamp says the copy only puts the id made up for an id-less message
	// on it (ErrNeedsID): same queue, same attempt, no wait.
	stamp bool
}

// ErrNeedsID is what a handler or middleware retries with when the message
// has no id of its own (Message.IDIsNew) and it needs one that every
// delivery shares, as idempotency does. The server publishes the message
// again at once to its own queue, with the id stamped on and the attempt
// unchanged, and acknowledges the original once the copy is confirmed: one
// extra publish, only for such messages. The copy goes to the back of the
// queue. The id is never derived from the content, since two distinct
// messages with the same body would then be one.
var ErrNeedsID = errors.New("acemq: the message has no id of its own; stamping one on it")

// settlement is how the original delivery ends.
type settlement uint8

const (
	settleAck      settlement = iota // done: acknowledge it
	settleGiveBack                   // back to the broker with requeue, as it was
	settleCopy                       // publish copy; the original's end depends on how that goes
)

// hop is one copy of a message the server publishes itself: by queue name,
// confirmed and mandatory.
type hop struct {
	to      string        // the queue
	attempt int           // x-acemq-attempt of the copy
	reason  string        // x-acemq-error; empty clears it
	wait    time.Duration // held in the process this long before publishing
	// rung is set for a copy to a rung queue: if no queue takes it (the
	// rung is missing), the wait is held in the process instead and the
	// copy goes straight to the work queue. Any other copy that reaches no
	// queue is refused.
	rung bool
	// delay is the rung's wait, for that fall-back.
	delay time.Duration
	// trim publishes the copy with only the wire contract's headers and
	// the properties AMQP can carry (wire.Trim): a copy that could not be
	// written whole is parked so.
	trim bool
}

// queueRun is one queue's settings, resolved once when Run starts: the
// decision and the executor read it and never change it.
type queueRun struct {
	name        string
	policy      retry.Policy
	concurrency int
	prefetch    int
	declare     bool // declare its topology and publish to rungs
	args        map[string]any
	deadLetter  string // name.dlq
	parked      string // name.parked
	metrics     *queueMetrics
}

// decide turns a handler's answer into a verdict, following the settlement
// table of the wire contract. It does no I/O and takes no lock; its only
// impurity is the policy's jitter.
func decide(q *queueRun, env Envelope, a ack.Ack, now time.Time) verdict {
	switch a.Outcome() {
	case ack.OutcomeAccept:
		return verdict{settle: settleAck}
	case ack.OutcomeRequeue:
		return verdict{settle: settleGiveBack}
	case ack.OutcomeRetry:
		return decideRetry(q, env, a.Err(), now)
	case ack.OutcomePark:
		return giveUp(q.parked, env, a.Reason(), a.Cause())
	case ack.OutcomeDeadLetter:
		return giveUp(q.deadLetter, env, a.Reason(), a.Cause())
	}
	return giveUp(q.deadLetter, env, reasonNoAnswer, causeNoAnswer)
}

// decideRetry asks the policy for the next wait. A fatal error, no policy,
// too great an age or no attempts left dead-letter the message instead.
func decideRetry(q *queueRun, env Envelope, err error, now time.Time) verdict {
	p := q.policy
	age := max(now.Sub(env.CreatedAt), 0) // a producer's clock may be ahead of ours
	switch {
	case errors.Is(err, ErrNeedsID):
		return verdict{settle: settleCopy, stamp: true, copy: hop{to: q.name, attempt: env.Attempt}}
	case ack.IsFatal(err):
		a := ack.DeadLetter(err)
		return giveUp(q.deadLetter, env, a.Reason(), a.Cause())
	case p.IsZero():
		return giveUp(q.deadLetter, env, "retry requested but no retry policy is set, so one delivery is all it gets: "+orNone(err), "no_policy")
	case p.TooOld(age):
		a := ack.TooOld(p.MaxAge(), err)
		return giveUp(q.deadLetter, env, a.Reason(), a.Cause())
	}
	w, ok := p.NextWait(env.Attempt, age)
	if !ok {
		return giveUp(q.deadLetter, env, fmt.Sprintf("exhausted %d attempts: %s", env.Attempt, orNone(err)), "exhausted")
	}
	if w.InBroker && q.declare {
		return verdict{settle: settleCopy, where: "broker",
			copy: hop{to: retry.RungName(q.name, w.Delay), attempt: env.Attempt + 1, rung: true, delay: w.Delay}}
	}
	return verdict{settle: settleCopy, where: "process", copy: hop{to: q.name, attempt: env.Attempt + 1, wait: w.Delay}}
}

// giveUp sets the message aside in queue with its reason; the attempt it
// failed on stays.
func giveUp(queue string, env Envelope, reason, cause string) verdict {
	return verdict{settle: settleCopy, cause: cause, copy: hop{to: queue, attempt: env.Attempt, reason: reason}}
}

// unwritable is the verdict for a copy that cannot be written at all (a
// property over an AMQP short string, headers over the frame size): park a
// trimmed copy, with a reason that says what was too large and what the
// copy was for.
func unwritable(q *queueRun, env Envelope, v verdict, err error) verdict {
	was := "a retry"
	if v.copy.reason != "" {
		was = v.copy.reason
	}
	reason := fmt.Sprintf("could not be written: %s; parked with only the acemq headers, instead of %s", limitOf(err), was)
	return verdict{settle: settleCopy, cause: "unwritable", copy: hop{to: q.parked, attempt: env.Attempt, reason: reason, trim: true}}
}

// limitOf names the limit err broke, in the transport's words.
func limitOf(err error) string {
	var le *transport.LimitError
	if errors.As(err, &le) {
		return fmt.Sprintf("%s is %d, over the limit of %d", le.Field, le.Size, le.Limit)
	}
	return fmt.Sprint(err)
}

// inProcessInstead is the verdict for a rung copy that reached no queue:
// the rung's wait, held in the process, then a copy to the work queue.
func (v verdict) inProcessInstead(queue string) verdict {
	v.where = "process"
	v.copy = hop{to: queue, attempt: v.copy.attempt, wait: v.copy.delay}
	return v
}

// The dead letter of a handler that returned the zero ack.Ack: a
// middleware that forgot to return its next handler's answer must not
// acknowledge a message nobody handled.
const (
	reasonNoAnswer = "the handler returned no answer (the zero ack.Ack), so nothing says it was handled"
	causeNoAnswer  = "no_answer"
)

// hasOwnDeadLetterRoute says whether the queue's own declaration gives the
// broker somewhere to dead-letter a rejected delivery: then a copy the
// library cannot place may be rejected to it, a last resort that loses
// nothing.
func (q *queueRun) hasOwnDeadLetterRoute() bool {
	_, ok := q.args["x-dead-letter-exchange"].(string) // "" is the default exchange, a route too
	return ok
}

func orNone(err error) string {
	if err == nil {
		return "acemq: no reason given"
	}
	return err.Error()
}
