package retry

import "time"

// The adjusters below are the names the policy had before its settings
// became WithX/X pairs (see docs/internals.md, "Settings"). They are kept for one
// release, each the same as its new name, so that code written against
// them still builds.

// GiveUpAfter is [Policy.WithMaxAge].
//
// Deprecated: use [Policy.WithMaxAge]; [Policy.MaxAge] reads it back.
func (p Policy) GiveUpAfter(age time.Duration) Policy { return p.WithMaxAge(age) }

// WaitInBrokerFrom is [Policy.WithBrokerWaitThreshold].
//
// Deprecated: use [Policy.WithBrokerWaitThreshold].
func (p Policy) WaitInBrokerFrom(d time.Duration) Policy { return p.WithBrokerWaitThreshold(d) }

// Threshold is [Policy.BrokerWaitThreshold].
//
// Deprecated: use [Policy.BrokerWaitThreshold].
func (p Policy) Threshold() time.Duration { return p.BrokerWaitThreshold() }

// OnDelayQueues is [Policy.WithDelayQueues](true). The method shared its
// name with the [OnDelayQueues] place of a wait, which it is not.
//
// Deprecated: use [Policy.WithDelayQueues] with true.
func (p Policy) OnDelayQueues() Policy { return p.WithDelayQueues(true) }

// SnoozeAtMost is [Policy.WithMaxSnoozes].
//
// Deprecated: use [Policy.WithMaxSnoozes].
func (p Policy) SnoozeAtMost(n int) Policy { return p.WithMaxSnoozes(n) }
