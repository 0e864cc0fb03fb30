package flow

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport"
)

// Breaker is one queue's circuit breaker: it decides whether a new
// delivery may start, from the outcomes the engine reports and the time on
// the engine's clock. Every answer is a value ([Decision], [Event]); it
// starts no goroutine and never waits, so the engine waits on its own
// clock for [Decision.Until] or [Decision.Wake]. Safe for concurrent use
// by the workers of one queue. In the closed state neither [Breaker.Allow]
// nor reporting an outcome that does not trip it reads the clock, takes
// more than one uncontended lock or allocates.
type Breaker struct {
	s   BreakerSettings
	now func() time.Time

	// word is gen<<2 | state, so that Allow in the closed state and
	// reports of a past generation need no lock.
	word atomic.Uint64

	mu        sync.Mutex
	state     State
	gen       uint64
	win       window
	lastErr   error // the last counted failure while closed
	since     time.Time
	why       string
	err       error
	until     time.Time // open: when the cool-down ends
	probes    int       // half-open: permits out
	successes int       // half-open: in a row
	wake      chan struct{}
	held      outages
}

// Permit is a delivery's leave to start. Report its outcome with it,
// exactly once, whatever happened (an outcome that says nothing is
// [Ignored]): in half-open a permit never reported holds a probe's slot.
// A permit from before the breaker's last change is stale: its outcome
// changes nothing, so a retry that was in flight when the breaker tripped
// cannot count as a probe or trip it again.
type Permit struct{ gen uint64 }

// Decision is the breaker's answer to "may a new delivery start now?".
type Decision struct {
	// Start: the delivery may start; report its outcome with Permit.
	Start  bool
	Permit Permit
	// State is the breaker's state the decision was taken in.
	State State
	// Until is, when open, the end of the cool-down: ask again then.
	Until time.Time
	// Wake, when Start is false, is closed at the breaker's next change
	// or when a probe's slot frees: wait on it together with Until on the
	// engine's clock and the stop.
	Wake <-chan struct{}
	// Event is the change this decision made (open to half-open once the
	// cool-down is over), or the zero Event.
	Event Event
}

// Status is a breaker's state as readiness, acemq status and the
// dashboard show it.
type Status struct {
	State State
	// Since is when the breaker entered State; zero if it never changed.
	Since time.Time
	// Until is, when open, the end of the cool-down.
	Until time.Time
	// Why and Err are the last change's.
	Why string
	Err error
	// Outcomes and Failures are what the window holds (closed).
	Outcomes, Failures int
	// Probes is how many probes run now (half-open).
	Probes int
}

// NewBreaker returns a closed breaker telling time by clock (the engine's:
// the memory transport's virtual clock in tests), or an error matching
// [ErrSettings] that says which setting it refuses.
func NewBreaker(clock transport.Clock, s BreakerSettings) (*Breaker, error) {
	if clock == nil {
		return nil, settingsError("breaker: no clock")
	}
	s, err := s.resolved()
	if err != nil {
		return nil, err
	}
	return &Breaker{s: s, now: clock.Now, win: newWindow(s.Window)}, nil
}

// Settings returns the breaker's settings, defaults filled in.
func (b *Breaker) Settings() BreakerSettings { return b.s }

// State returns the breaker's state without a lock. An open breaker whose
// cool-down is over reads Open until the next Allow moves it.
func (b *Breaker) State() State { return State(b.word.Load() & 3) }

// Allow decides whether a new delivery may start now: closed, yes; open,
// no until the cool-down ends; half-open, yes for up to Probes at once.
func (b *Breaker) Allow() Decision {
	w := b.word.Load()
	if State(w&3) == Closed {
		return Decision{Start: true, Permit: Permit{gen: w >> 2}}
	}
	return b.allowSlow()
}

func (b *Breaker) allowSlow() Decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ev Event
	if b.state == Open {
		now := b.now()
		if now.Before(b.until) {
			return Decision{State: Open, Until: b.until, Wake: b.wakeLocked()}
		}
		ev = b.toLocked(HalfOpen, now, fmt.Sprintf("the cool-down of %s is over: probing with %d at a time", b.s.CoolDown, b.s.Probes), nil)
	}
	switch b.state {
	case HalfOpen:
		if b.probes >= b.s.Probes {
			return Decision{State: HalfOpen, Wake: b.wakeLocked(), Event: ev}
		}
		b.probes++
		return Decision{Start: true, Permit: Permit{gen: b.gen}, State: HalfOpen, Event: ev}
	default: // closed since the lock-free look
		return Decision{Start: true, Permit: Permit{gen: b.gen}, Event: ev}
	}
}

// Report tells the breaker how the delivery p let start went; err is the
// handler's error, which a change's [Event] carries. It returns the
// change the outcome made, or the zero Event.
func (b *Breaker) Report(p Permit, o Outcome, err error) Event {
	w := b.word.Load()
	if w>>2 != p.gen || (o == Ignored && State(w&3) == Closed) {
		return Event{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gen != p.gen {
		return Event{}
	}
	switch b.state {
	case Closed:
		if o == Ignored {
			return Event{}
		}
		b.win.push(o == Failure)
		if o == Failure {
			b.lastErr = err
		}
		if f, n := b.win.failures, b.win.filled; f > 0 && n >= b.s.MinOutcomes && float64(f)/float64(n) >= b.s.FailureRatio {
			return b.toLocked(Open, b.now(), because(fmt.Sprintf("%d of the last %d failed", f, n), b.lastErr), b.lastErr)
		}
	case HalfOpen:
		if b.probes > 0 {
			b.probes--
		}
		switch o {
		case Success:
			b.successes++
			if b.successes >= b.s.CloseAfter {
				return b.toLocked(Closed, b.now(), fmt.Sprintf("%d probes in a row succeeded", b.successes), nil)
			}
		case Failure:
			return b.toLocked(Open, b.now(), because("a probe failed", err), err)
		}
		b.signalLocked() // a probe's slot is free
	}
	return Event{}
}

// Done reports a handler's answer: [OutcomeOf] with the settings'
// predicate, and the answer's error.
func (b *Breaker) Done(p Permit, a ack.Ack) Event {
	return b.Report(p, OutcomeOf(a, b.s.Counts), a.Err())
}

// Trip opens the breaker now for a cool-down, whatever its state, with why
// as the reason ("tripped by hand: ..."): for acemqtest and an operator.
// An open breaker's cool-down starts again and no Event is returned.
func (b *Breaker) Trip(why string) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if b.state == Open {
		b.until, b.why = now.Add(b.s.CoolDown), why
		return Event{}
	}
	return b.toLocked(Open, now, why, nil)
}

// Reset closes the breaker now with an empty window, whatever its state.
func (b *Breaker) Reset(why string) Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == Closed {
		b.win.reset()
		return Event{}
	}
	return b.toLocked(Closed, b.now(), why, nil)
}

// Status returns the breaker's state for readiness and operators.
func (b *Breaker) Status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := Status{State: b.state, Since: b.since, Why: b.why, Err: b.err, Outcomes: b.win.filled, Failures: b.win.failures, Probes: b.probes}
	if b.state == Open {
		st.Until = b.until
	}
	return st
}

// Held returns how long, since t, the breaker has kept its queue's
// messages waiting in the broker (open or half-open): what the engine
// takes off a message's age before it judges it too old (doc.go, "Age").
// It remembers the last [OutageMemory] outages; time held in older ones
// is not counted.
func (b *Breaker) Held(t time.Time) time.Duration {
	if b.word.Load()>>2 == 0 { // never changed: never held, and no lock on the hot path
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held.since(t, b.now())
}

// toLocked moves the breaker to state to at now and returns the change.
func (b *Breaker) toLocked(to State, now time.Time, why string, err error) Event {
	ev := Event{From: b.state, To: to, At: now, Why: why, Err: err}
	switch to {
	case Open:
		b.until = now.Add(b.s.CoolDown)
		ev.Until = b.until
		if b.state == Closed {
			b.held.begin(now)
		}
	case HalfOpen:
		b.probes, b.successes = 0, 0
	case Closed:
		b.win.reset()
		b.lastErr = nil
		b.held.end(now)
	}
	b.state, b.since, b.why, b.err = to, now, why, err
	b.gen++
	b.word.Store(b.gen<<2 | uint64(to))
	b.signalLocked()
	return ev
}

func (b *Breaker) wakeLocked() chan struct{} {
	if b.wake == nil {
		b.wake = make(chan struct{})
	}
	return b.wake
}

func (b *Breaker) signalLocked() {
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
}

func because(what string, err error) string {
	if err == nil {
		return what
	}
	return what + ": " + err.Error()
}
