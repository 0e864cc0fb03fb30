package idempotency

import "time"

// WithClockFunc is the form [WithClock] had before acemq told time by one
// clock type (transport.Clock, see docs/internals.md, "Settings"): a store reading its
// time from now. It is kept for one release, for a clock that is only a
// function.
//
// Deprecated: use [WithClock] with the clock itself (WithClock(clock)
// rather than WithClockFunc(clock.Now)).
func WithClockFunc(now func() time.Time) Option { return clockOption(now) }
