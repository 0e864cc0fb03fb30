// Package polltest waits, in real time, for a condition that other
// goroutines make true: a server's worker, a relay, a broker. It is the one
// place the project's own tests poll, so that every wait has a generous
// deadline (a loaded machine is slow, not stuck) and a failure says what
// was awaited rather than only that time ran out. A test waits on an event
// this way instead of sleeping and then checking.
package polltest

import (
	"testing"
	"time"
)

// Generous is the deadline Eventually gives a condition: long enough that
// two cores shared by many test binaries never trip it, short enough that
// a condition that never holds fails the run in reasonable time.
const Generous = 30 * time.Second

// Eventually polls cond until it holds, failing the test after Generous
// with what was awaited ("the copy on the rung", "3 rows deleted").
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	Within(tb, Generous, what, cond)
}

// Within is Eventually with a deadline of its own, for a condition that
// takes real time by design (a publish retried with backoff, a broker
// restarting) or one a test wants to fail sooner.
func Within(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	if waited, ok := wait(within, cond); !ok {
		tb.Fatalf("timed out after %s waiting until %s", waited.Round(time.Millisecond), what)
	}
}

// Until polls cond until it holds (true) or within passes (false), for a
// caller that decides itself what a timeout means: a fault scenario that
// reports its accounting before failing, an example with no testing.TB.
func Until(within time.Duration, cond func() bool) bool {
	_, ok := wait(within, cond)
	return ok
}

// UntilEvery is Until at a fixed pace, every apart, for a source that
// refreshes on a schedule of its own (the management API samples a queue
// every few seconds): asking it sooner only loads the broker and cannot
// see sooner.
func UntilEvery(within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}

// wait polls cond until it holds or within passes, the pause between two
// checks doubling from 100 µs (a memory-transport test is done in
// microseconds) to 50 ms (so that a wait of seconds, or a condition that
// asks a broker, does not take a core the other tests need).
func wait(within time.Duration, cond func() bool) (time.Duration, bool) {
	began := time.Now()
	deadline := began.Add(within)
	pause := 100 * time.Microsecond
	for !cond() {
		if time.Now().After(deadline) {
			return time.Since(began), false
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	return time.Since(began), true
}
