package acemq

import (
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// A handler slower than the broker's consumer_timeout (30 minutes by
// default on RabbitMQ, often lowered) loses its delivery: the broker closes
// the channel, the handler's ack is stale, and the message comes back at
// the same attempt, to run as long again, forever. So a handler's context
// ends at the server's HandlerTimeout, set below the broker's; and a
// message redelivered after its handler ran past that timeout is
// dead-lettered, with a reason naming the timeout, instead of run again.

// watchHandlers cancels the context of every handler running longer than
// the handler timeout, and remembers its message as overdue. It checks
// every eighth of the timeout, at most every second; the returned func
// stops it and waits for it. It allocates nothing per message: a worker's
// context is made anew only after it was cancelled.
func (e *engine) watchHandlers() (stop func()) {
	if e.handlerTimeout <= 0 {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	tick := time.NewTicker(min(max(e.handlerTimeout/8, time.Millisecond), time.Second))
	go func() {
		defer close(done)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case now := <-tick.C:
				e.expireHandlers(now)
			}
		}
	}()
	return func() { close(quit); <-done }
}

func (e *engine) expireHandlers(now time.Time) {
	for _, c := range e.consumers {
		c.mu.Lock()
		workers := c.workers
		c.mu.Unlock()
		for _, w := range workers {
			if m, cancel := w.expire(now, e.handlerTimeout); m != nil {
				e.overdue.add(c.q.name, m.ID())
				e.log.Warn("acemq: a handler ran past the handler timeout; its context is cancelled. Should the broker redeliver its message (consumer_timeout), it is dead-lettered rather than run again",
					zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()), zap.Stringer("timeout", e.handlerTimeout))
				cancel()
			}
		}
	}
}

// overdueSet remembers, by queue and id, the messages whose handler ran
// past the handler timeout. It is bounded: past maxOverdue entries it
// starts again, forgetting the oldest along with the rest.
type overdueSet struct {
	mu  sync.Mutex
	ids map[[2]string]struct{}
}

const maxOverdue = 4096

func (s *overdueSet) add(queue, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil || len(s.ids) >= maxOverdue {
		s.ids = make(map[[2]string]struct{})
	}
	s.ids[[2]string{queue, id}] = struct{}{}
}

// take reports whether the message is overdue, and forgets it.
func (s *overdueSet) take(queue, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return false
	}
	k := [2]string{queue, id}
	_, ok := s.ids[k]
	delete(s.ids, k)
	return ok
}

// overdue is the verdict for a redelivery of a message whose handler ran
// past the handler timeout: a dead letter naming the timeout.
func overdue(q *queueRun, env Envelope, timeout time.Duration) verdict {
	return giveUp(q.deadLetter, env, fmt.Sprintf(
		"the handler ran past its timeout of %s and the broker delivered the message again (its consumer_timeout closed the channel?), so it is not run again", timeout),
		"consumer_timeout")
}
