package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// overdueSet remembers, by queue, id and attempt, the messages whose
// handler ran past its timeout, with that timeout (the attempt too: once
// a late handler's retry is placed, a redelivery of that next attempt,
// whose handler never ran, is not overdue); and, by queue, what the server has
// learnt of the broker's consumer timeout (brokertimeout.go). The ids are
// bounded: past maxOverdue entries it starts again, forgetting the oldest
// along with the rest.
type overdueSet struct {
	mu  sync.Mutex
	ids map[overdueKey]time.Duration

	consumers map[string]*consumer     // by queue, once its workers run: for the broker's reports
	broker    map[string]time.Duration // by queue, the broker's consumer timeout, the lowest stated
	learntAny atomic.Bool              // broker holds one
}

// overdueKey names one attempt of one message of a queue.
type overdueKey struct {
	queue, id string
	attempt   int
}

const maxOverdue = 4096

func (s *overdueSet) add(queue string, m message, timeout time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil || len(s.ids) >= maxOverdue {
		s.ids = make(map[overdueKey]time.Duration)
	}
	s.ids[overdueKey{queue, m.ID(), m.Attempt()}] = timeout
}

// take reports whether the message's attempt is overdue, with the
// timeout it ran past, and forgets it.
func (s *overdueSet) take(queue string, m message) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return 0, false
	}
	k := overdueKey{queue, m.ID(), m.Attempt()}
	timeout, ok := s.ids[k]
	delete(s.ids, k)
	return timeout, ok
}

// brokerTimeout is the broker's consumer timeout learnt for queue; 0 when
// none is known. Every handler's start asks: until a timeout is learnt it
// takes no lock.
func (s *overdueSet) brokerTimeout(queue string) time.Duration {
	if !s.learntAny.Load() {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broker[queue]
}

// learn records timeout as queue's broker consumer timeout, the lowest
// said winning; it reports whether that lowered what was known.
func (s *overdueSet) learn(queue string, timeout time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if was, ok := s.broker[queue]; ok && was <= timeout {
		return false
	}
	if s.broker == nil {
		s.broker = make(map[string]time.Duration)
	}
	s.broker[queue] = timeout
	s.learntAny.Store(true)
	return true
}

// serve records c as its queue's consumer, for the broker's reports: each
// worker calls it as it starts, before it takes a delivery.
func (s *overdueSet) serve(c *consumer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.consumers == nil {
		s.consumers = make(map[string]*consumer)
	}
	s.consumers[c.q.name] = c
}

func (s *overdueSet) consumerOf(queue string) *consumer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.consumers[queue]
}
