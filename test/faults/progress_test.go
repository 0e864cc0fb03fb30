package faults_test

import "time"

// untilProgress polls cond until it holds, as until does, but gives up only
// when progress (a count that moves as the work gets done: rows left,
// messages handled) has not moved for stall, or after ceiling in all. A
// loaded machine is slow, not stuck: a fixed deadline short enough to fail
// a stuck scenario soon fails a slow one too, and one long enough for the
// slowest makes a stuck one wait it out. It reports whether cond held, and
// how long it waited.
func untilProgress(stall, ceiling time.Duration, progress func() int, cond func() bool) (bool, time.Duration) {
	began := time.Now()
	last, moved := progress(), began
	for !cond() {
		now := time.Now()
		if p := progress(); p != last {
			last, moved = p, now
		}
		if now.Sub(moved) > stall || now.Sub(began) > ceiling {
			return false, now.Sub(began)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true, time.Since(began)
}
