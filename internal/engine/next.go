package engine

import (
	"time"

	"github.com/acemq/acemq/internal/backoff"
	"github.com/acemq/acemq/internal/wire"
)

// A verdict with a copy is carried out by publishing the copy and then
// settling the original. What happens when that publish fails is decided
// here, as decide decides the first step: next says, from how the publish
// went, what the settlement does now (publish again, a copy of another
// kind, or end the original one way), and names the turn it took so the
// executor (settle.go) logs and counts it. No I/O, no locks, no clock.
// Table-tested in next_test.go, one row per failure the fault suite
// covers; docs/wire-contract.md states the same rules.

// plan is a verdict being carried out: the copy it publishes and how that
// copy's publishes have gone so far, which is all next needs to know.
type plan struct {
	verdict
	tries   int  // publishes of this copy so far, the last one included
	nacks   int  // how many of them the broker nacked
	holding bool // the copy was refused and its original is held unacknowledged meanwhile
	pause   pause
}

// published is what became of one publish of a copy.
type published uint8

const (
	copyRouted     published = iota // confirmed, and a queue took it
	copyUnroutable                  // confirmed, but no queue took it (for a delayed copy: its level's exchange is missing too)
	copyNacked                      // the broker refused it
	copyBlocked                     // not sent: the broker blocks publishes (a memory or disk alarm), or the transport holds them back while it is stalled
	copyUnknown                     // no confirm: the channel closed, the timeout passed, the transport failed
	copyTooLarge                    // refused before it was written: over an AMQP limit
	copyForGood                     // the broker refuses every publish until an operator acts (forgood.go)
	copyStopped                     // not published: the stop ended the pause before it
	copyTakenBack                   // not published: the broker took the original back during the pause (its consumer_timeout closed the channel)
	copyHookFailed                  // not published: what the handler asked to run before its dead letter failed (deadletterhook.go)
)

// pause is what the settlement waits before it publishes the copy (again),
// off the worker, and what a stop does to that wait.
type pause struct {
	d    time.Duration
	kind pauseKind
}

type pauseKind uint8

const (
	pauseNone pauseKind = iota
	// pauseWait is a retry's or snooze's wait in the process, on the
	// engine's clock. A stop does not wait it out: once the consumers are
	// cancelled the copy goes at once, so nothing is lost and the attempt
	// count is kept.
	pauseWait
	// pauseRepublish spaces the publishes of a blocked or nacked copy, on
	// the wall clock (an alarm clears and a leader is elected in real
	// time, also under a memory broker whose virtual clock stands still).
	// The stop's cut ends it: the outcome is unknown then.
	pauseRepublish
	// pauseHeld spaces the tries of a refused copy while its original is
	// held. A stop ends it: the original goes back to the broker.
	pauseHeld
)

// turn names what next made of a publish: what the executor logs and
// counts. It is a value so that the table says it, and tests read it.
type turn uint8

const (
	turnPlaced        turn = iota // the copy is safe: ack the original
	turnTooLarge                  // the copy cannot be written: park a trimmed one instead
	turnRungMissing               // the rung reached no queue: wait in the process instead
	turnDelaysMissing             // the delay level is missing: wait in the process instead
	turnBlocked                   // the broker blocks publishes: publish again with backoff
	turnNacked                    // nacked: publish again with backoff, up to nackRetries more times
	turnUnknown                   // no confirm: give the original back
	turnForGood                   // refused for good: give the original back, and Run ends
	turnOwnRoute                  // refused: reject the original to the queue's own dead-letter route
	turnHeld                      // refused: hold the original and try the copy again
	turnStillHeld                 // a held copy is still refused: try again
	turnStopped                   // the stop ended the pause: give the original back
	turnTakenBack                 // the broker has the original again: publish nothing, settle nothing
	turnHookFailed                // what runs before the dead letter failed: hold the original and try both again
)

// nackRetries is how many times a nacked copy is published again before
// the nack counts as a refusal. RabbitMQ nacks a publish its queue could
// not take just then (a quorum queue electing a leader, a queue process
// restarting), and taking the first nack as final would reject an
// original that a source queue without dead-lettering of its own would
// lose. With republishBackoff the last try comes 2.5 s after the first
// nack, time enough for a quorum queue to elect a leader.
const nackRetries = 6

// republishBackoff spaces the publishes of a blocked or nacked copy:
// 50 ms doubling, up to 1 s.
var republishBackoff = backoff.Policy{Min: 50 * time.Millisecond, Max: time.Second}

// heldBackoff spaces the tries of a refused copy: a queue deleted or full
// stays so for a while, and each try costs the broker a publish.
var heldBackoff = backoff.Policy{Min: time.Second, Max: 30 * time.Second, Jitter: true}

// start is the plan for a verdict's copy before its first publish: its
// wait in the process, if it has one.
func start(v verdict) plan {
	p := plan{verdict: v}
	if v.copy.wait > 0 {
		p.pause = pause{d: v.copy.wait, kind: pauseWait}
	}
	return p
}

// withinBrokerTimeout caps a wait in the process at limit, the time the
// broker leaves the original before its consumer timeout takes it back
// (the engine's cap below the timeout, less what the handler took): held
// longer, the original would come back and run again at the same attempt,
// round and round, the ladder never spent. The retry comes sooner than the
// policy asked instead. It reports whether it capped the wait.
func withinBrokerTimeout(p plan, limit time.Duration) (plan, bool) {
	if p.pause.kind != pauseWait || p.pause.d <= limit {
		return p, false
	}
	limit = max(limit, 0)
	p.copy.wait = limit
	p.pause.d = limit
	if limit == 0 {
		p.pause = pause{}
	}
	return p, true
}

// ending is p settling its original with s and outcome o.
func (p plan) ending(s settlement, o outcome) plan {
	p.settle, p.outcome, p.pause = s, o, pause{}
	return p
}

// next says what the settlement does after a publish of p's copy went as
// r (err its error; blockedTooLong when the broker has blocked it for
// longer than the publish timeout, which the executor's clock tells).
// The plan it returns either settles the original (settle is not
// settleCopy) or publishes a copy again after its pause.
func next(q *queueRun, env wire.Envelope, p plan, r published, err error, blockedTooLong bool) (plan, turn) {
	p.tries++
	if r == copyNacked {
		p.nacks++
	}
	switch {
	case r == copyRouted:
		return p.ending(settleAck, outcomeOfCopy(p.verdict)), turnPlaced
	case r == copyUnknown:
		return p.ending(settleGiveBack, outcomeGivenBack), turnUnknown
	case r == copyForGood:
		return p.ending(settleGiveBack, outcomeGivenBack), turnForGood
	case r == copyStopped:
		return p.ending(settleGiveBack, outcomeGivenBack), turnStopped
	case r == copyTakenBack:
		// It is delivered again, to be handled again: a copy now would
		// be a second message, and a second chain of retries.
		return p.ending(settleDrop, outcomeGivenBack), turnTakenBack
	case r == copyTooLarge && !p.copy.trim:
		// Nothing was written and no connection harmed; the same copy
		// would fail the same way every time.
		return start(unwritable(q, env, p.verdict, err)), turnTooLarge
	case r == copyUnroutable && (p.copy.rung || p.copy.delayed):
		t := turnRungMissing
		if p.copy.delayed {
			t = turnDelaysMissing
		}
		return start(p.inProcessInstead(q.name)), t
	case r == copyHookFailed && !p.holding:
		// Nothing was published; the dead letter waits for its hook
		// (a routing slip's compensation hop) as for a refused copy.
		p.holding, p.tries, p.nacks = true, 0, 0
		p.pause = pause{d: heldBackoff.Delay(0), kind: pauseHeld}
		return p, turnHookFailed
	case p.holding:
		p.pause = pause{d: heldBackoff.Delay(p.tries), kind: pauseHeld}
		return p, turnStillHeld
	case r == copyBlocked && !blockedTooLong:
		p.pause = pause{d: republishBackoff.Delay(p.tries - 1), kind: pauseRepublish}
		return p, turnBlocked
	case r == copyBlocked:
		return p.ending(settleGiveBack, outcomeGivenBack), turnUnknown
	case r == copyNacked && p.nacks <= nackRetries:
		p.pause = pause{d: republishBackoff.Delay(p.tries - 1), kind: pauseRepublish}
		return p, turnNacked
	case q.hasOwnDeadLetterRoute():
		// Nacked for good, reaching no queue, or too large even trimmed:
		// the broker will not take the copy. Never a silent loss.
		return p.ending(settleReject, outcomeOwnRoute), turnOwnRoute
	}
	p.holding, p.tries, p.nacks = true, 0, 0
	p.pause = pause{d: heldBackoff.Delay(0), kind: pauseHeld}
	return p, turnHeld
}

// capBelow is the handler timeout of a queue whose broker takes deliveries
// back after timeout: a tenth less, and at least 5 s less (half, for a
// timeout under 10 s). Ending the handler's context is not the ack: the
// handler must notice, return, and its settlement publish a copy, wait
// for the confirm and ack, all before the broker looks; and the broker's
// clock started when it sent the delivery, which may have waited in the
// prefetch before a worker took it. A tenth leaves 30 s of a 5-minute
// timeout for that; 5 s covers a confirm on a loaded broker. The broker
// checks once per channel tick (a minute by default), which only ever
// makes it later, so no margin is spent on that.
func capBelow(timeout time.Duration) time.Duration {
	return timeout - max(timeout/10, min(timeout/2, 5*time.Second))
}
