package memory

import "time"

// Next returns when the earliest timer of a virtual clock falls due: an
// After channel or one of the broker's own (a message's expiry, a consumer
// timeout, an at-least-once dead letter offered again), and false when none
// is pending or the clock is real or of another making. A test that advances to Next, again and
// again, runs the code under test through every wait it is in without
// knowing how long any of them is: jitter and all.
func (c *Clock) Next() (time.Time, bool) {
	if c.real || c.ext != nil {
		return time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].at, true
}
