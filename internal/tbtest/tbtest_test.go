package tbtest_test

import (
	"testing"

	"github.com/acemq/acemq/internal/tbtest"
)

func TestFailure(t *testing.T) {
	t.Parallel()
	if got := tbtest.Failure(t, func(testing.TB) {}); got != "" {
		t.Errorf("Failure of a helper that passed = %q, want \"\"", got)
	}
	if got := tbtest.Failure(t, func(tb testing.TB) { tb.Errorf("late by %d", 3); tb.Error("and lost") }); got != "late by 3; and lost" {
		t.Errorf("Failure after Errorf and Error = %q", got)
	}
	after := false
	var order []int
	got := tbtest.Failure(t, func(tb testing.TB) {
		tb.Cleanup(func() { order = append(order, 1) })
		tb.Cleanup(func() { order = append(order, 2) })
		tb.Logf("a log line goes to the test's log")
		tb.Fatal("stop")
		after = true
	})
	if got != "stop" || after {
		t.Errorf("Failure after Fatal = %q, ran on: %v; want it to stop the helper", got, after)
	}
	if len(order) != 2 || order[0] != 2 || order[1] != 1 {
		t.Errorf("cleanups ran %v, want [2 1]", order)
	}
}
