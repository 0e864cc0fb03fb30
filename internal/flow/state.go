package flow

import (
	"fmt"
	"time"
)

// State is a breaker's position. The zero State is Closed, so that a
// breaker nobody has tripped lets everything through.
type State uint8

// The states, in the order a dependency's outage walks them.
const (
	// Closed: deliveries start freely; outcomes fill the window.
	Closed State = iota
	// Open: no delivery starts until the cool-down is over; the messages
	// wait in the broker.
	Open
	// HalfOpen: up to Probes deliveries at once test the dependency; a
	// failure opens the breaker again, CloseAfter successes in a row close it.
	HalfOpen
)

var stateNames = [...]string{"closed", "open", "half-open"}

// String returns the state's plain name, the one logs, metrics and
// readiness show.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Event is one change of a breaker's state, as a value the engine logs,
// counts, traces and shows (acemq status, the dashboard, readiness). The
// zero Event is no change: [Event.Changed] is false.
type Event struct {
	From, To State
	// At is the breaker's clock when the change was made.
	At time.Time
	// Why says it in a sentence a person on call can act on: "12 of the
	// last 20 failed: dial tcp 10.0.0.7:443: connection refused". It holds
	// the handler's error text, which a producer may have shaped: escape
	// it (internal/escape) before a terminal or a page shows it.
	Why string
	// Err is the error that made the change (the last counted failure on
	// a trip, the probe's on a re-open), nil for the others.
	Err error
	// Until is, for a change to Open, when the cool-down ends.
	Until time.Time
}

// Changed reports whether e is a change rather than the zero Event.
func (e Event) Changed() bool { return e.From != e.To }

// String reads like a log line: "closed → open: 12 of the last 20 failed: ...".
func (e Event) String() string {
	if !e.Changed() {
		return "no change"
	}
	return e.From.String() + " → " + e.To.String() + ": " + e.Why
}
