package engine

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// settling is a plan on its way to being carried out, with what its end
// reports (finish): the process span, in ctx, and the handler's time.
type settling struct {
	plan
	ctx  context.Context // the process span's: every copy is its child
	took time.Duration   // how long the handler ran
	// began is when the handler began on the delivery: the broker's
	// consumer timeout runs from before it (zero: no handler ran).
	began time.Time
	ran   bool // a handler ran: not so for an overdue message's redelivery
	held  bool // the process span ended when the original was held
	off   bool // the settlement left the worker for a goroutine of its own
	// lease is the subscription the delivery was taken from, told when it
	// ends (nil: not counted there, as for one the stop took over).
	lease *lease

	why          string    // why a held copy was refused ("missing", "nacked", "refused")
	heldSince    time.Time // when its original was first held
	blockedSince time.Time // when the broker first blocked this copy
}

// unstarted ends a delivery no handler took, or one the stop took over
// from its handler: given back, reported by nobody (end with no message).
var unstarted = settling{plan: plan{verdict: verdict{settle: settleGiveBack, outcome: outcomeGivenBack}}}

// unstartedOn is unstarted for a delivery taken from l.
func unstartedOn(l *lease) settling {
	s := unstarted
	s.lease = l
	return s
}

// instead is s ending its original as st, the server's doing rather than
// the handler's answer: given back (settleGiveBack) or left to the broker,
// which has it again (settleDrop).
func (s settling) instead(st settlement) settling {
	s.plan = plan{verdict: verdict{settle: st, outcome: outcomeGivenBack}}
	return s
}

// settle carries out the verdict in s for one delivery: the one loop.
// Decide said the first step; while it is a copy, the copy is published
// and next (next.go) says the next step from how that went, until the
// original is settled, once, by end. A copy published at once is
// published on the worker; a copy that waits, or whose publish must be
// tried again after a pause, goes on on a goroutine of its own (prefetch
// bounds how many), so the workers go on with messages that need no
// publish.
func (c *consumer) settle(d transport.Delivery, m message, s settling) {
	if s.settle == settleCopy {
		s.plan = c.planOf(s.verdict, s.heldFor())
		if s.where == "process" { // a broker wait counts once the broker took it
			c.count(m, s.verdict)
		}
	}
	c.carry(d, m, s)
}

// heldFor is how long the original has been held here so far.
func (s settling) heldFor() time.Duration {
	if s.began.IsZero() {
		return 0
	}
	return time.Since(s.began)
}

// planOf is the plan of v's copy, its wait in the process capped below the
// broker's consumer timeout once it is learnt (withinBrokerTimeout); took
// is how long the original has been held already.
func (c *consumer) planOf(v verdict, took time.Duration) plan {
	p := start(v)
	if b := c.e.overdue.brokerTimeout(c.q.name); b > 0 {
		var capped bool
		if p, capped = withinBrokerTimeout(p, capBelow(b)-took); capped && c.waitCapped.CompareAndSwap(false, true) {
			c.e.log.Warn("acemq: a retry's wait in the process is longer than the broker's consumer timeout allows; such waits are cut short below it, so that the broker does not take the message back and deliver it again at the same attempt. Give the queue rungs or the delay queues for long waits",
				zap.String("queue", c.q.name), zap.Stringer("wait", v.copy.wait), zap.Stringer("now", p.copy.wait), zap.Stringer("broker_timeout", b))
		}
	}
	return p
}

func (c *consumer) carry(d transport.Delivery, m message, s settling) {
	for s.settle == settleCopy {
		if s.pause.kind != pauseNone && !s.off {
			c.carryOff(d, m, s)
			return
		}
		s = c.try(d, m, s)
	}
	c.end(d, m, s)
}

// carryOff goes on with the settlement on a goroutine of the engine's.
// (Apart from carry, so that carry's arguments stay off the heap.)
func (c *consumer) carryOff(d transport.Delivery, m message, s settling) {
	s.off = true
	c.e.spawn(func() { c.carry(d, m, s) })
}

// try waits out the plan's pause, publishes its copy once, and takes the
// turn next says.
func (c *consumer) try(d transport.Delivery, m message, s settling) settling {
	r, err := c.wait(s.pause), error(nil)
	if r == copyRouted { // the pause is over: publish
		if s.holding && s.why == "missing" {
			c.redeclare(s.copy.to)
		}
		r, err = c.publishOnce(s.ctx, m, d, s.copy)
	}
	tooLong := false
	if r == copyBlocked {
		if s.blockedSince.IsZero() {
			s.blockedSince = time.Now()
		}
		tooLong = time.Since(s.blockedSince) > c.e.publishTimeout
	}
	was := s.plan
	var t turn
	s.plan, t = next(c.q, *m.env, s.plan, r, err, tooLong)
	if t == turnRungMissing || t == turnDelaysMissing { // a wait in the process now: within the broker's timeout
		s.plan = c.planOf(s.verdict, s.heldFor())
	}
	return c.turned(m, s, was, t, r, err)
}

// wait waits out p. It returns copyRouted when the copy is to be
// published now; copyStopped when the stop ended the pause and it is not;
// copyTakenBack when the broker took back what the consumer's channel
// held meanwhile (its consumer_timeout): the original among it, which the
// broker delivers again.
func (c *consumer) wait(p pause) published {
	if p.kind == pauseNone {
		return copyRouted
	}
	retaken := c.retakes()
	var stop <-chan struct{}
	switch p.kind {
	case pauseWait:
		select {
		case <-c.e.clock.After(p.d):
		case <-c.e.stop.cancelled: // a stop does not wait it out
		case <-retaken:
			return copyTakenBack
		}
		return copyRouted
	case pauseRepublish:
		stop = c.e.stop.cut
	case pauseHeld:
		stop = c.e.stop.cancelled
	}
	t := time.NewTimer(p.d) // the wall clock: see pauseRepublish
	defer t.Stop()
	select {
	case <-t.C:
		return copyRouted
	case <-stop:
		return copyStopped
	case <-retaken:
		return copyTakenBack
	}
}

// end settles the original as s says, and reports it (finish) just
// before: the one place that acknowledges, gives back or rejects a
// delivery. m is nil for a delivery that is not reported here: one no
// handler took, or one the stop took over from its handler (that
// handler's return reports it).
func (c *consumer) end(d transport.Delivery, m message, s settling) {
	if m.env != nil {
		c.finish(m, s, s.outcome)
	}
	if s.lease != nil {
		defer s.lease.done()
	}
	var err error
	switch s.settle {
	case settleAck:
		if err = d.Ack(); err != nil {
			c.e.log.Warn("acemq: ack failed; the broker will redeliver", zap.String("queue", c.q.name), zap.String("id", idOf(d, m)), zap.Error(err))
		}
		return
	case settleGiveBack:
		c.e.stop.gaveBack() // for the drain's line
		err = d.Reject(true)
	case settleReject:
		err = d.Reject(false)
	case settleDrop:
		return
	}
	if err != nil {
		c.e.log.Debug("acemq: give back or reject", zap.String("queue", c.q.name), zap.String("id", idOf(d, m)), zap.Error(err))
	}
}

// idOf is the id of d for a log line, from m once it is read.
func idOf(d transport.Delivery, m message) string {
	if m.env != nil {
		return m.ID()
	}
	return wire.Read(d).ID
}
