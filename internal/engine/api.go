package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// What the root package asks of a running engine, apart from Run.

// Stop asks the engine to stop by deadline and waits until Run has
// returned: ErrCutOff when the deadline cut a handler off.
func (e *Engine) Stop(deadline time.Time) error {
	e.stop.request(deadline)
	<-e.stop.ended
	if e.stop.cutOff() {
		return ErrCutOff
	}
	return nil
}

// Ended is closed once Run has returned.
func (e *Engine) Ended() <-chan struct{} { return e.stop.ended }

// CheckReady says what keeps a Run that has subscribed every queue from
// being ready, in the broker's words (nil when nothing does): a stop
// under way, a refusal for now, a consumer the broker ended, a transport
// disconnected or blocked.
func (e *Engine) CheckReady() error {
	select {
	case <-e.stop.requested:
		if ch, ok := e.t.(transport.Checker); ok {
			if err := ch.Check(); err != nil { // why it stops, as likely as not: say it
				return fmt.Errorf("stopping: %w", err)
			}
		}
		return fmt.Errorf("stopping")
	default:
	}
	if err := e.refused.check(); err != nil {
		return err
	}
	held := make([]string, 0, len(e.consumers))
	var awaiting error // said last: anything else that is wrong comes first
	for _, c := range e.consumers {
		if !c.consuming.Load() && c.awaiting.Load() {
			if awaiting == nil {
				awaiting = fmt.Errorf("queue %s: the broker ended its consumer: %w", c.q.name, ErrAwaitingHandlers)
			}
			continue
		}
		if !c.consuming.Load() {
			return fmt.Errorf("queue %s: the broker ended its consumer; consuming it again", c.q.name)
		}
		if why := c.breakerOpen(); why != "" {
			held = append(held, why)
		}
	}
	if len(held) == len(e.consumers) { // nothing is consumed; one queue of several held is still ready
		return fmt.Errorf("every queue's breaker is open: %s", strings.Join(held, "; "))
	}
	if ch, ok := e.t.(transport.Checker); ok {
		if err := ch.Check(); err != nil {
			return err
		}
	}
	return awaiting
}

// Refused is the broker's refusal for now of the consumers' connections,
// nil when there is none: what a Run that is not yet subscribed waits on.
func (e *Engine) Refused() error { return e.refused.check() }

// BreakerInfo is one queue's breaker as the root's Server.Breakers shows
// it.
type BreakerInfo struct {
	Queue     string
	Status    flow.Status
	Sleeping  bool // the supervisor waits out its cool-down on the engine's clock
	Switching bool // the consumer is being cancelled or consumed again for it
}

// Breakers are the run's breakers, in the order of its queues.
func (e *Engine) Breakers() []BreakerInfo {
	var out []BreakerInfo
	for _, c := range e.consumers {
		if b := c.q.breaker; b != nil {
			out = append(out, BreakerInfo{Queue: c.q.name, Status: b.Status(), Sleeping: c.coolingDown.Load(), Switching: c.switched()})
		}
	}
	return out
}

// Waiting counts, over every queue, the deliveries the server holds that
// wait without a wait on the clock of their own: those prefetched beyond
// workers that all have a delivery in hand, and those whose worker waits
// for a throttle group's slot. A test on a
// virtual clock (acemqtest) counts them as waiting, not as work, once
// every other delivery in hand is asleep on the clock. It reports false
// while a worker is about to take a prefetched delivery.
func (e *Engine) Waiting() (held int, ok bool) {
	seen := map[*throttle]bool{}
	for _, c := range e.consumers {
		if sub := c.subscription(); sub != nil {
			if buffered := len(sub.Deliveries()); buffered > 0 {
				if c.holding.Load() < int64(len(c.workersNow())) {
					return 0, false
				}
				held += buffered
			}
		}
		for _, t := range c.q.throttles {
			if seen[t] || t.group == nil {
				continue
			}
			seen[t] = true
			held += t.group.Waiting() // never beside a free slot: Release hands it on

		}
	}
	return held, true
}

// Orphaned counts the deliveries in hand on subscriptions the broker
// ended under a deleted queue that waits for them before it is consumed
// again (rejoin.go): the broker no longer counts them as unacknowledged,
// and a test on a virtual clock counts their handlers asleep on it as it
// counts deliveries.
func (e *Engine) Orphaned() int {
	n := 0
	for _, c := range e.consumers {
		if c.awaiting.Load() {
			n += int(c.holding.Load())
		}
	}
	return n
}

// Moves counts the changes of what Waiting counts: equal before and after
// a reading of the broker's counts, they were all taken at one moment of
// the engine's.
func (e *Engine) Moves() uint64 {
	var n uint64
	for _, c := range e.consumers {
		n += c.moves.Load()
	}
	return n
}

// BreakerMarker is the name of the marker queue this engine keeps for
// queue's breaker while it is not closed (breaker_marker.go).
func (e *Engine) BreakerMarker(queue string) string { return markerName(queue, e.instance) }

// ErrNoBreaker is what Trip and Reset return for a queue without one.
var ErrNoBreaker = errors.New("acemq: the queue has no breaker")

// Trip opens queue's breaker now, for why; Reset closes it. For tests
// and an operator's endpoint: the queue is cancelled or consumed again as
// when the breaker itself changes (a Reset during the cool-down ends it).
func (e *Engine) Trip(queue, why string) error {
	return e.turnBreaker(queue, (*flow.Breaker).Trip, why)
}

// Reset closes queue's breaker now, for why.
func (e *Engine) Reset(queue, why string) error {
	return e.turnBreaker(queue, (*flow.Breaker).Reset, why)
}

func (e *Engine) turnBreaker(queue string, turn func(*flow.Breaker, string) flow.Event, why string) error {
	for _, c := range e.consumers {
		if c.q.name != queue {
			continue
		}
		if c.q.breaker == nil {
			return fmt.Errorf("%w: %s", ErrNoBreaker, queue)
		}
		c.breakerTurned(turn(c.q.breaker, why))
		return nil
	}
	return fmt.Errorf("%w: %s is not served", ErrNoBreaker, queue)
}

// Decision is decide's verdict as the root's Server.Decide shows it.
type Decision struct {
	Ack, GiveBack    bool // else a copy
	To               string
	Attempt, Snoozes int
	Wait             time.Duration
	Where            retry.Where
	Reason, Cause    string
}

// Decide is the decision Run makes for a delivery of q with envelope env
// whose handler answered a, at now, assuming the delay queues are there
// where the queue may declare.
func Decide(spec Queue, env wire.Envelope, a ack.Ack, now time.Time) Decision {
	q := newQueueRun(spec)
	q.delays = q.declare
	v := decide(q, env, a, now)
	switch v.settle {
	case settleAck:
		return Decision{Ack: true}
	case settleGiveBack:
		return Decision{GiveBack: true}
	}
	h := v.copy
	out := Decision{To: h.to, Attempt: h.attempt, Snoozes: h.snoozes, Reason: h.reason, Cause: v.cause, Wait: h.wait}
	switch {
	case h.rung:
		out.Wait, out.Where = h.delay, retry.OnRung
	case h.delayed:
		out.Wait, out.Where = h.delay, retry.OnDelayQueues
	}
	return out
}
