package engine

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq/transport"
)

// redelivery decides, before its handler runs, what becomes of a delivery
// the broker marked redelivered; it reports true when it dealt with it,
// false when the handler is to run.
//
//   - Its message is overdue (a handler here ran past its timeout, or past
//     the broker's consumer timeout): it is dead-lettered with the reason
//     consumer_timeout, not run again.
//   - A handler of this server still runs on its message: the broker took
//     that handler's delivery back (its consumer_timeout closed the
//     channel, or the connection was lost) and delivered it again. It is
//     not run beside it: it waits for that handler (awaitRunning) and then
//     runs, unless meanwhile the handler turned overdue or ran past the
//     broker's timeout (then it is dead-lettered as overdue), the wait
//     reached its bound (then it goes back to the broker, which delivers
//     it again: never lost) or a stop came (then it goes back, as every
//     delivery not started does). Should the broker take back what the
//     channel holds meanwhile (consumer_timeout), the redelivery is stale
//     and dropped: the broker delivers it once more.
func (c *consumer) redelivery(w *worker, d transport.Delivery, m message, pctx context.Context) bool {
	s := settling{ctx: pctx, lease: w.lease}
	if timeout, ok := c.e.overdue.take(c.q.name, m); ok {
		s.verdict = overdue(c.q, *m.env, timeout)
		c.settle(d, m, s)
		return true
	}
	end, timeout := c.awaitRunning(w, m.ID())
	switch end {
	case runEnded:
		return false
	case runOverdue:
		if t, ok := c.e.overdue.take(c.q.name, m); ok { // this is the redelivery it was kept for
			timeout = t
		}
		s.verdict = overdue(c.q, *m.env, timeout)
		c.settle(d, m, s)
	case runStopping:
		select { // given back before the cancel, it would come straight back (see work)
		case <-c.e.stop.cancelled:
		case <-c.e.stop.cut:
		}
		c.end(d, m, s.instead(settleGiveBack))
	case runTakenBack: // stale: settling it would do nothing
		c.end(d, m, s.instead(settleDrop))
	case runWaitedOut:
		c.e.log.Warn("acemq: a redelivery waited its bound for the handler of the same message, still running here; it goes back to the broker rather than run beside it",
			zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.Stringer("waited", timeout))
		c.end(d, m, s.instead(settleGiveBack))
	}
	return true
}

// runEnd is how a redelivery's wait for the handler of its message ended.
type runEnd int

const (
	runEnded     runEnd = iota // no handler here runs on the message (any more): run it
	runOverdue                 // the handler is overdue: dead-letter the redelivery
	runStopping                // a stop was requested: give it back
	runWaitedOut               // the wait reached its bound: give it back
	runTakenBack               // the broker took the redelivery back too: drop it
)

// awaitRunning waits while another worker of c runs a handler on message
// id, until that handler ends, turns overdue, or has run the broker's
// consumer timeout (when learnt: it is then marked overdue here), or a
// stop is requested. The wait is bounded by the handler timeout a handler
// would begin under now (the cap below the broker's, once learnt: the
// redelivery waiting unacknowledged must not outlive the broker's timeout
// in turn), or DefaultHandlerTimeout where there is none. It returns how
// it ended, with the timeout the handler ran past (runOverdue) or the
// bound (runWaitedOut).
func (c *consumer) awaitRunning(self *worker, id string) (runEnd, time.Duration) {
	r, ok := c.runningOf(self, id)
	if !ok {
		return runEnded, 0 // the common case: allocates nothing
	}
	bound := c.handlerTimeout()
	if bound <= 0 {
		bound = c.e.cfg.WaitBound
	}
	waited := time.NewTimer(bound)
	defer waited.Stop()
	retaken := c.retakes()
	c.e.log.Warn("acemq: the broker delivered again a message whose handler still runs here (its consumer_timeout or a lost connection took the delivery back); it waits for that handler rather than run beside it",
		zap.String("queue", c.q.name), zap.String("id", id), zap.Stringer("running_for", time.Since(r.began)), zap.Stringer("bound", bound))
	for {
		if r.overdue {
			return runOverdue, r.limit
		}
		var past *time.Timer // when it has run the broker's timeout
		if broker := c.e.overdue.brokerTimeout(c.q.name); broker > 0 {
			left := time.Until(r.began.Add(broker))
			if left <= 0 {
				// Not marked stale: a redelivery of the same id is all but
				// surely of the same message, but were it a second message
				// with that id, the running one's answer must still settle.
				c.e.markOverdue(c.q, r.w, time.Now(), broker, false)
				return runOverdue, broker
			}
			past = time.NewTimer(left)
		}
		end := c.waitChange(r, past, waited, retaken)
		if past != nil {
			past.Stop()
		}
		if end == runWaitedOut && past != nil && time.Since(r.began) >= c.e.overdue.brokerTimeout(c.q.name) {
			end = runEnded // both fired: it has run the broker's timeout, which says more; look again
		}
		if end != runEnded {
			return end, bound
		}
		if r, ok = c.runningOf(self, id); !ok {
			return runEnded, 0
		}
	}
}

// waitChange waits for r to change, past to fire (when not nil), the
// bound (waited), the broker taking the channel's deliveries back
// (retaken) or a stop; runEnded means to look again.
func (c *consumer) waitChange(r running, past, waited *time.Timer, retaken <-chan struct{}) runEnd {
	var pastC <-chan time.Time
	if past != nil {
		pastC = past.C
	}
	select {
	case <-r.changed:
	case <-pastC:
	case <-waited.C:
		return runWaitedOut
	case <-retaken:
		return runTakenBack
	case <-c.e.stop.requested:
		return runStopping
	}
	return runEnded
}

// runningOf finds a worker of c other than self running a handler on
// message id.
func (c *consumer) runningOf(self *worker, id string) (running, bool) {
	for _, w := range c.workersNow() {
		if w == self {
			continue
		}
		if r, ok := w.runningOn(id); ok {
			return r, true
		}
	}
	return running{}, false
}
