package flow

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// The defaults of [BreakerSettings], each chosen against what the peers do
// (doc.go has the table).
const (
	// DefaultWindow: the ratio is taken over the last 20 outcomes.
	// resilience4j takes 100; MassTransit's kill switch counts the
	// attempts of a one-minute period once it has seen 100. Ours counts
	// every retry's failure, so one message on a five-attempt ladder fills
	// up to five slots; 20 keeps one message's ladder a quarter of the
	// window, and still fills within seconds when a dependency is down
	// under any steady arrival rate.
	DefaultWindow = 20
	// DefaultMinOutcomes: the window must be full before it can trip, as
	// resilience4j's defaults (minimumNumberOfCalls = slidingWindowSize)
	// have it, so that the first few failures after a start cannot trip a
	// quiet queue.
	DefaultMinOutcomes = DefaultWindow
	// DefaultFailureRatio: half the window failing trips it
	// (resilience4j's 50%). MassTransit trips at 10% (15% in its
	// documentation's example); with every retry counted that would let
	// one or two messages' ladders stop a queue. Below one half the ladder
	// is doing its job; at one half or more it is only burning attempts.
	DefaultFailureRatio = 0.5
	// DefaultCoolDown: a minute open before probing, what MassTransit
	// (restart after 1 minute), resilience4j (waitDurationInOpenState 60s)
	// and sony/gobreaker (Timeout 60s) all wait.
	DefaultCoolDown = time.Minute
	// DefaultProbes: one delivery at a time in half-open, as gobreaker's
	// MaxRequests and NServiceBus's throttled mode (one message at a time
	// after consecutive failures): a dependency that is still down costs
	// one attempt of one message per cool-down, not a prefetch's worth.
	DefaultProbes = 1
	// DefaultCloseAfter: three successes in a row close it. gobreaker
	// closes on one; one success can be a message that never reached the
	// dependency (a cache hit, an early return), three at one at a time
	// cost three handler durations and are a signal.
	DefaultCloseAfter = 3
	// MaxWindow bounds Window so that a typo cannot allocate gigabytes.
	MaxWindow = 1 << 16
)

// BreakerSettings shape a [Breaker]. The zero value is the defaults; a
// zero field takes its default, a negative or out-of-range one is an
// error from [NewBreaker].
type BreakerSettings struct {
	// Window is how many of the last counted outcomes the failure ratio
	// is taken over.
	Window int
	// MinOutcomes is how many outcomes the window must hold before it can
	// trip; at most Window.
	MinOutcomes int
	// FailureRatio trips the breaker when failures/outcomes reaches it,
	// in (0, 1].
	FailureRatio float64
	// CoolDown is how long the breaker stays open before it lets probes
	// through; a failed probe opens it for another CoolDown.
	CoolDown time.Duration
	// Probes is how many deliveries may run at once in half-open.
	Probes int
	// CloseAfter is how many probe successes in a row close the breaker.
	CloseAfter int
	// Counts says whether a retry's error is the dependency's fault
	// (see [OutcomeOf]); nil is [DefaultCounts].
	Counts func(error) bool
}

// ErrSettings matches, with errors.Is, every error [NewBreaker],
// [NewRate] and [NewGroup] return for settings they refuse.
var ErrSettings = errors.New("acemq: flow settings")

func settingsError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSettings, fmt.Sprintf(format, args...))
}

// resolved returns s with its zero fields defaulted, or why it cannot be
// used.
func (s BreakerSettings) resolved() (BreakerSettings, error) {
	if s.Window == 0 {
		s.Window = DefaultWindow
	}
	if s.MinOutcomes == 0 {
		s.MinOutcomes = min(DefaultMinOutcomes, s.Window)
	}
	if s.FailureRatio == 0 {
		s.FailureRatio = DefaultFailureRatio
	}
	if s.CoolDown == 0 {
		s.CoolDown = DefaultCoolDown
	}
	if s.Probes == 0 {
		s.Probes = DefaultProbes
	}
	if s.CloseAfter == 0 {
		s.CloseAfter = DefaultCloseAfter
	}
	if s.Counts == nil {
		s.Counts = DefaultCounts
	}
	switch {
	case s.Window < 1 || s.Window > MaxWindow:
		return s, settingsError("breaker window %d: want 1 to %d outcomes", s.Window, MaxWindow)
	case s.MinOutcomes < 1 || s.MinOutcomes > s.Window:
		return s, settingsError("breaker minimum of %d outcomes: want 1 to the window's %d, or it could never trip", s.MinOutcomes, s.Window)
	case math.IsNaN(s.FailureRatio) || s.FailureRatio <= 0 || s.FailureRatio > 1:
		return s, settingsError("breaker failure ratio %v: want more than 0 and at most 1", s.FailureRatio)
	case s.CoolDown < 0:
		return s, settingsError("breaker cool-down %s: want a positive duration", s.CoolDown)
	case s.Probes < 1:
		return s, settingsError("breaker probes %d: want at least 1", s.Probes)
	case s.CloseAfter < 1:
		return s, settingsError("breaker close after %d successes: want at least 1", s.CloseAfter)
	}
	return s, nil
}
