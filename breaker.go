package acemq

import (
	"fmt"
	"time"

	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/flow"
)

// Breaker stops consuming a queue while its handlers' failures say that
// what they depend on is down, so that the messages wait in the broker
// instead of running through their whole retry ladder into the .dlq. It
// counts the handlers' answers over a window: once the share of failures
// (retries whose error Counts says is the dependency's) reaches
// FailureRatio, the breaker opens: the server stops taking deliveries from
// the queue (it cancels its consumer; what was prefetched and not started
// goes back to the broker), lets the retries already in flight finish
// their waits, and after CoolDown lets Probes messages through one at a
// time; CloseAfter successes in a row close it and the queue is consumed
// as before, a failure opens it for another CoolDown. Messages held back
// spend no attempt. Their age grows in the broker as ever (Message.Age
// says so), but the retry policy's MaxAge is judged without the time the
// breaker held them: an outage does not make them too old.
//
// A zero field takes its default (the defaults and why are in
// internal/flow: a window of 20, all 20 before it can trip, a ratio of one
// half, a minute's cool-down, one probe, three successes to close).
type Breaker struct {
	// Window is how many of the last answers the ratio is taken over, and
	// MinOutcomes how many it must hold before it can trip.
	Window, MinOutcomes int
	// FailureRatio trips the breaker when failures/answers reaches it, in
	// (0, 1].
	FailureRatio float64
	// CoolDown is how long it stays open before it probes.
	CoolDown time.Duration
	// Probes is how many messages run at once while it probes, and
	// CloseAfter how many probe successes in a row close it.
	Probes, CloseAfter int
	// Counts says whether a retry's error is the dependency's fault. Nil:
	// every retry's error counts except one marked ack.Fatal, and a
	// context cancelled by a stop. A message dead-lettered or parked by its
	// handler is the message's fault and never counts.
	Counts func(error) bool
}

// settings is b as the engine takes it.
func (b *Breaker) settings() *flow.BreakerSettings {
	if b == nil {
		return nil
	}
	return &flow.BreakerSettings{Window: b.Window, MinOutcomes: b.MinOutcomes, FailureRatio: b.FailureRatio,
		CoolDown: b.CoolDown, Probes: b.Probes, CloseAfter: b.CloseAfter, Counts: b.Counts}
}

// BreakerStatus is one queue's breaker as Server.Breakers shows it: for
// a service's own status page, and for tests.
type BreakerStatus struct {
	Queue string
	// State is "closed", "open" or "half-open".
	State string
	// Since is when it entered State (zero if it never changed), and
	// Until, while open, when it probes.
	Since, Until time.Time
	// Why is what the last change said ("4 of the last 5 failed: ...").
	// It holds a handler's error text: escape it before a page shows it.
	Why string
	// Outcomes and Failures are what its window holds.
	Outcomes, Failures int
	// CoolingDown says the server waits out the cool-down on its clock
	// (acemqtest counts that wait as asleep), and Switching that it is
	// cancelling the queue's consumer or consuming the queue again for the
	// breaker (CoolingDown is part of that).
	CoolingDown, Switching bool
}

// Breakers returns the breakers of the Run under way, by queue, in the
// order the server serves the queues; nil before Run or without one.
func (s *Server) Breakers() []BreakerStatus {
	s.mu.Lock()
	e := s.run
	s.mu.Unlock()
	if e == nil {
		return nil
	}
	var out []BreakerStatus
	for _, b := range e.Breakers() {
		st := b.Status
		out = append(out, BreakerStatus{Queue: b.Queue, State: st.State.String(), Since: st.Since, Until: st.Until, Why: st.Why,
			Outcomes: st.Outcomes, Failures: st.Failures, CoolingDown: b.Sleeping, Switching: b.Switching})
	}
	return out
}

// TripBreaker opens queue's breaker now, saying why, as if its handlers'
// failures had: for tests (acemqtest) and for an operator who knows the
// dependency is down. ResetBreaker closes it, and the queue is consumed
// again at once. Both fail for a queue without a breaker, or before Run.
func (s *Server) TripBreaker(queue, why string) error {
	return s.turnBreaker(queue, why, (*engine.Engine).Trip)
}

// ResetBreaker closes queue's breaker, saying why.
func (s *Server) ResetBreaker(queue, why string) error {
	return s.turnBreaker(queue, why, (*engine.Engine).Reset)
}

func (s *Server) turnBreaker(queue, why string, turn func(*engine.Engine, string, string) error) error {
	s.mu.Lock()
	e := s.run
	s.mu.Unlock()
	if e == nil {
		return fmt.Errorf("acemq: breaker of queue %s: Run has not been called", queue)
	}
	return turn(e, queue, why)
}
