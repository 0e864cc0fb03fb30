package engine

import (
	"fmt"
	"time"

	"github.com/acemq/acemq/internal/wire"
	"go.uber.org/zap"
)

// A handler slower than the broker's consumer_timeout (30 minutes by
// default on RabbitMQ, often lowered) loses its delivery: the broker closes
// the channel, the handler's ack is stale, and the message comes back at
// the same attempt, to run as long again, forever. So a handler's context
// ends at the queue's handler timeout, HandlerTimeout or, once the broker
// has said its own timeout (brokertimeout.go), a cap below that; and a
// message redelivered after its handler ran past its timeout, or past the
// broker's, is dead-lettered, with a reason naming the timeout, instead of
// run again.

// watchHandlers cancels the context of every handler running longer than
// the handler timeout it began under, and remembers its message as
// overdue. It runs even without a HandlerTimeout, since a queue's cap can
// be learnt at any time, and checks every eighth of the shortest timeout
// in force, at most every second; the returned func stops it and waits for
// it. It allocates nothing per message: a worker's context is made anew
// only after it was cancelled.
func (e *Engine) watchHandlers() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	tick := time.NewTimer(e.watchEvery())
	go func() {
		defer close(done)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case now := <-tick.C:
				e.expireHandlers(now)
				tick.Reset(e.watchEvery())
			}
		}
	}()
	return func() { close(quit); <-done }
}

// watchEvery is how often the watchdog looks: an eighth of the shortest
// handler timeout in force, between a millisecond and a second.
func (e *Engine) watchEvery() time.Duration {
	shortest := time.Duration(0)
	for _, c := range e.consumers {
		if d := c.handlerTimeout(); d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	if shortest == 0 {
		return time.Second
	}
	return min(max(shortest/8, time.Millisecond), time.Second)
}

func (e *Engine) expireHandlers(now time.Time) {
	for _, c := range e.consumers {
		for _, w := range c.workersNow() {
			if m, timeout, cancel := w.expire(now); m.env != nil {
				e.overdue.add(c.q.name, m, timeout)
				e.log.Warn("acemq: a handler ran past the handler timeout; its context is cancelled. Should the broker redeliver its message (consumer_timeout), it is dead-lettered rather than run again",
					zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()), zap.Stringer("timeout", timeout))
				cancel()
			}
		}
	}
}

// overdue is the verdict for a redelivery of a message whose handler ran
// past its timeout: a dead letter naming the timeout.
func overdue(q *queueRun, env wire.Envelope, timeout time.Duration) verdict {
	return giveUp(q.deadLetter, env, fmt.Sprintf(
		"the handler ran past its timeout of %s and the broker delivered the message again (its consumer_timeout closed the channel?), so it is not run again", timeout),
		"consumer_timeout")
}
