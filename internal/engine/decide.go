package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/internal/redact"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// verdict is what becomes of one delivery once its handler has answered:
// a value, decided without I/O, that the executor (settle.go) carries out.
type verdict struct {
	settle settlement
	// outcome is what the server did, once the original is settled: the
	// outcome attribute of the metrics and the process span.
	outcome outcome
	// copy is the message to publish before the original is settled; only
	// for settleCopy.
	copy hop
	// cause names why the message was given up on ("exhausted", "parked",
	// ...): the outcome of acemq.messages.dead.lettered.total once the copy
	// is safe. Empty for a retry.
	cause string
	// where is where a retry or snooze waits ("process", "broker" for a
	// rung, "delays"): the attribute of acemq.retry.scheduled. Empty for a
	// give-up.
	where string
	// snooze says the copy is a snooze, which spends no attempt: counted
	// by acemq.messages.snoozed, not as a retry.
	snooze bool
	// stamp says the copy only puts the id made up for an id-less message
	// on it (ErrNeedsID): same queue, same attempt, no wait.
	stamp bool
	// err is a retry's error, the handler's own, for the retry's log line:
	// an on-call engineer tells a 429 from a 500 by it after the fact.
	err error
}

// settlement is how the original delivery ends.
type settlement uint8

const (
	settleAck      settlement = iota // done: acknowledge it
	settleGiveBack                   // back to the broker with requeue, as it was
	settleCopy                       // publish copy; the original's end depends on how that goes (next.go)
	settleReject                     // reject it without requeue, to the queue's own dead-letter route
	settleDrop                       // nothing: the broker has it again already (taken back, or given back by the stop)
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
	// delayed is set for a copy that waits on the delay queues (package
	// delay) to arrive in to: it is published to the level of its delay,
	// and if that is missing the wait is held in the process instead, as
	// for a missing rung.
	delayed bool
	// delay is the rung's or the delay queues' wait, for that fall-back.
	delay time.Duration
	// snoozes, when above zero, is the copy's x-acemq-snoozes.
	snoozes int
	// trim publishes the copy with only the wire contract's headers and
	// the properties AMQP can carry (wire.Trim): a copy that could not be
	// written whole is parked so.
	trim bool
}

// queueRun is one queue's settings, resolved once when Run starts: the
// decision and the executor read it and never change it.
type queueRun struct {
	name          string
	policy        retry.Policy
	concurrency   int
	prefetch      int
	declare       bool // declare its topology and publish to rungs
	delays        bool // the delay queues are there, and can deliver to this queue
	args          map[string]any
	throttleNames []string // the throttles it is under, by name
	// breakerSettings, when set, make breaker, the queue's circuit
	// breaker, at Run: the one thing here that changes during a run.
	breakerSettings *flow.BreakerSettings
	breaker         *flow.Breaker
	throttles       []*throttle        // made at Run, in name order
	topology        transport.Topology // what declaring it declares
	subscriptions   transport.Topology // its bindings to exchanges, declared with the topology
	strict          bool               // a delivery limit below the attempts stops Run
	deadLetter      string             // name.dlq
	parked          string             // name.parked
	metrics         *queueMetrics
}

// newQueueRun is the engine's reading of a queue's resolved settings.
func newQueueRun(q Queue) *queueRun {
	return &queueRun{
		name:            q.Name,
		policy:          q.Policy,
		concurrency:     q.Concurrency,
		prefetch:        q.Prefetch,
		declare:         q.Declare,
		args:            q.Args,
		topology:        q.Topology,
		subscriptions:   q.Subscriptions,
		strict:          q.Strict,
		deadLetter:      q.DeadLetter,
		parked:          q.Parked,
		metrics:         newQueueMetrics(q.Name),
		throttleNames:   q.Throttles,
		breakerSettings: q.Breaker,
	}
}

// decide turns a handler's answer into a verdict, following the settlement
// table of the wire contract. It does no I/O and takes no lock; its only
// impurity is the policy's jitter.
func decide(q *queueRun, env wire.Envelope, a ack.Ack, now time.Time) verdict {
	switch a.Outcome() {
	case ack.OutcomeAccept:
		return verdict{settle: settleAck}
	case ack.OutcomeRequeue:
		return verdict{settle: settleGiveBack, outcome: outcomeRequeue}
	case ack.OutcomeRetry:
		return decideRetry(q, env, a, now)
	case ack.OutcomeSnooze:
		return decideSnooze(q, env, a, now)
	case ack.OutcomePark:
		return giveUp(q.parked, env, a.Reason(), a.Cause())
	case ack.OutcomeDeadLetter:
		return giveUp(q.deadLetter, env, a.Reason(), a.Cause())
	}
	return giveUp(q.deadLetter, env, reasonNoAnswer, causeNoAnswer)
}

// decideRetry asks the policy for the next wait, or takes the handler's
// own (ack.RetryAfter). A fatal error, no policy, too great an age, a wait
// that would end past the maximum age, or no attempts left dead-letter the
// message instead.
func decideRetry(q *queueRun, env wire.Envelope, a ack.Ack, now time.Time) verdict {
	p, err := q.policy, a.Err()
	age := ageOf(env, now)
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
	if d, chosen := a.After(); chosen {
		if v, past := pastMaxAge(q, env, p, age, d, "retry", err); past {
			return v
		}
		w = p.WaitFor(d)
	}
	v := q.wait(env, w, hop{to: q.name, attempt: env.Attempt + 1})
	if v.cause == "" { // a retry, not a wait too long to carry
		v.err = err
	}
	return v
}

// decideSnooze puts the message off without spending an attempt, bounded
// by the policy's limit on snoozes and its maximum age.
func decideSnooze(q *queueRun, env wire.Envelope, a ack.Ack, now time.Time) verdict {
	p := q.policy
	if p.IsZero() {
		p = retry.None() // no policy: the default limit and threshold, no age
	}
	d, _ := a.After()
	if n := p.MaxSnoozes(); env.Snoozes >= n {
		return giveUp(q.deadLetter, env, fmt.Sprintf("snoozed %d times, the retry policy's limit, and asked to be snoozed for %s again", env.Snoozes, d), "snooze_limit")
	}
	if v, past := pastMaxAge(q, env, p, ageOf(env, now), d, "snooze", nil); past {
		return v
	}
	v := q.wait(env, p.WaitFor(d), hop{to: q.name, attempt: env.Attempt, snoozes: env.Snoozes + 1})
	v.snooze = true
	return v
}

// pastMaxAge gives up now on a message whose chosen wait d would bring it
// back older than the policy's maximum age, where it would only be given
// up on: the reason says so, without the trip.
func pastMaxAge(q *queueRun, env wire.Envelope, p retry.Policy, age, d time.Duration, what string, err error) (verdict, bool) {
	if !p.TooOld(age + d) {
		return verdict{}, false
	}
	why := fmt.Errorf("a %s after %s would come back %s old", what, d, (age + d).Round(time.Millisecond))
	if err != nil {
		why = fmt.Errorf("%w: %w", why, err)
	}
	a := ack.TooOld(p.MaxAge(), why)
	return giveUp(q.deadLetter, env, a.Reason(), a.Cause()), true
}

// wait places a retry or snooze copy h where w says: on a rung or on the
// delay queues when the server may use them, else held in the process. A
// wait longer than the delay queues can carry gives up on the message now,
// rather than fail to publish it again on every delivery.
func (q *queueRun) wait(env wire.Envelope, w retry.Wait, h hop) verdict {
	switch {
	case w.Where == retry.OnDelayQueues && q.delays && w.Delay > delay.Max:
		return giveUp(q.deadLetter, env, fmt.Sprintf("asked to wait %s, longer than the delay queues' longest wait of %s", w.Delay, delay.Max), "wait_too_long")
	case w.Where == retry.OnRung && q.declare:
		h.to, h.rung, h.delay = retry.RungName(q.name, w.Delay), true, w.Delay
		return verdict{settle: settleCopy, where: "broker", copy: h}
	case w.Where == retry.OnDelayQueues && q.delays:
		h.delayed, h.delay = true, w.Delay
		return verdict{settle: settleCopy, where: "delays", copy: h}
	}
	h.wait = w.Delay
	return verdict{settle: settleCopy, where: "process", copy: h}
}

// giveUp sets the message aside in queue with its reason; the attempt it
// failed on stays. A URL's password in the reason (a handler's error that
// names its database) is hidden: whoever reads the queue reads the reason,
// and so does every log line about it.
func giveUp(queue string, env wire.Envelope, reason, cause string) verdict {
	return verdict{settle: settleCopy, cause: cause, copy: hop{to: queue, attempt: env.Attempt, reason: redact.URLsIn(reason)}}
}

// unwritable is the verdict for a copy that cannot be written at all (a
// property over an AMQP short string, headers over the frame size): park a
// trimmed copy, with a reason that says what was too large and what the
// copy was for.
func unwritable(q *queueRun, env wire.Envelope, v verdict, err error) verdict {
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

// inProcessInstead is the verdict for a rung or delayed copy that reached
// no queue: its wait, held in the process, then a copy to the work queue.
func (v verdict) inProcessInstead(queue string) verdict {
	v.where = "process"
	v.copy = hop{to: queue, attempt: v.copy.attempt, snoozes: v.copy.snoozes, wait: v.copy.delay}
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
