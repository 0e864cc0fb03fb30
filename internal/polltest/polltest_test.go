package polltest_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/internal/tbtest"
)

func TestWithinReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	go func() {
		for range 3 {
			time.Sleep(time.Millisecond)
			n.Add(1)
		}
	}()
	if failed := tbtest.Failure(t, func(tb testing.TB) {
		polltest.Within(tb, polltest.Generous, "three steps", func() bool { return n.Load() == 3 })
	}); failed != "" {
		t.Fatalf("Within failed although the condition came to hold: %s", failed)
	}
}

func TestWithinFailsSayingWhatWasAwaited(t *testing.T) {
	t.Parallel()
	calls := 0
	failed := tbtest.Failure(t, func(tb testing.TB) {
		polltest.Within(tb, 20*time.Millisecond, "the copy on the rung", func() bool { calls++; return false })
		tb.Errorf("Within returned")
	})
	if failed == "Within returned" {
		t.Fatal("Within returned although the condition never held")
	}
	if !strings.Contains(failed, "waiting until the copy on the rung") || !strings.Contains(failed, "timed out after") {
		t.Errorf("Within failed with %q, want it to say what it awaited", failed)
	}
	if calls < 2 {
		t.Errorf("the condition was checked %d times, want it polled", calls)
	}
}

func TestEventuallyChecksAtOnce(t *testing.T) {
	t.Parallel()
	if failed := tbtest.Failure(t, func(tb testing.TB) { polltest.Eventually(tb, "true", func() bool { return true }) }); failed != "" {
		t.Fatal(failed)
	}
}

func TestUntil(t *testing.T) {
	t.Parallel()
	if polltest.Until(10*time.Millisecond, func() bool { return false }) {
		t.Error("Until = true for a condition that never holds")
	}
	var n atomic.Int32
	if !polltest.Until(polltest.Generous, func() bool { return n.Add(1) == 5 }) {
		t.Error("Until = false for a condition that holds on the fifth check")
	}
}

func TestUntilEvery(t *testing.T) {
	t.Parallel()
	calls := 0
	if polltest.UntilEvery(30*time.Millisecond, 10*time.Millisecond, func() bool { calls++; return false }) {
		t.Error("UntilEvery = true for a condition that never holds")
	}
	if calls < 2 || calls > 5 {
		t.Errorf("checked %d times in 30 ms at 10 ms apart, want about 4", calls)
	}
	n := 0
	if !polltest.UntilEvery(polltest.Generous, time.Millisecond, func() bool { n++; return n == 3 }) {
		t.Error("UntilEvery = false for a condition that holds on the third check")
	}
}
