package acemq

import (
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
)

// Settlement is how a delivery ends, in a [Verdict]: one of the Settle*
// constants. Its words are the library's own, for tests and logs; none is
// on the wire.
type Settlement string

// The settlements of a delivery.
const (
	// SettleAck: the delivery is acknowledged, and that is all.
	SettleAck Settlement = "ack"
	// SettleGiveBack: the delivery is rejected with requeue, going back
	// to its queue as it was: what [Server.Decide] says of ack.Requeue.
	SettleGiveBack Settlement = "give_back"
	// SettleCopy: a copy is published (To, Attempt, Wait, ...) and the
	// delivery acknowledged once the copy is confirmed.
	SettleCopy Settlement = "copy"
)

// Verdict is what a server does with one delivery once its handler has
// answered, as a value: what [Server.Decide] returns, so that a test can
// hold a handler and a policy to the settlement without a broker.
type Verdict struct {
	// Settle is how the original delivery ends: [SettleAck],
	// [SettleGiveBack] or [SettleCopy].
	Settle Settlement
	// To is the queue the copy goes to: the queue itself for a retry or a
	// snooze, a rung, .dlq or .parked.
	To string
	// Attempt and Snoozes are the copy's x-acemq-attempt and
	// x-acemq-snoozes.
	Attempt, Snoozes int
	// Wait is how long the copy waits before it is delivered, and Where
	// where it waits.
	Wait  time.Duration
	Where retry.Where
	// Reason is the copy's x-acemq-error: why it was given up on.
	Reason string
	// Cause names why it was given up on, as acemq.messages.dead.lettered
	// counts it ("exhausted", "too_old", "rejected", ...); "" for a retry.
	Cause string
}

// Decide returns the verdict this server would give a delivery from queue
// with envelope env whose handler answered a, at now: the same decision
// Run makes, without a transport. It assumes the server may declare and
// the delay queues are there, unless the server's declare is off. Any
// jitter of the policy applies, as it would in Run.
func (s *Server) Decide(queue string, env Envelope, a ack.Ack, now time.Time) Verdict {
	if env.Attempt < 1 {
		env.Attempt = 1
	}
	q, _ := s.resolve(queue, s.configFor(queue)) // a limit Run would refuse: decided without it
	d := engine.Decide(q, wire.Envelope(env), a, now)
	switch {
	case d.Ack:
		return Verdict{Settle: SettleAck}
	case d.GiveBack:
		return Verdict{Settle: SettleGiveBack}
	}
	out := Verdict{Settle: SettleCopy, To: d.To, Attempt: d.Attempt, Snoozes: d.Snoozes, Reason: d.Reason, Cause: d.Cause, Wait: d.Wait, Where: d.Where}
	if out.Snoozes == 0 {
		out.Snoozes = env.Snoozes // a copy carries the count on
	}
	return out
}
