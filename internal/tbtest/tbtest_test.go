package tbtest_test

import (
	"testing"

	"github.com/acemq/acemq/internal/tbtest"
)

func TestFailure(t *testing.T) {
	t.Parallel()
	if got := tbtest.Failure(func(testing.TB) {}); got != "" {
		t.Errorf("Failure of a helper that passed = %q, want \"\"", got)
	}
	if got := tbtest.Failure(func(tb testing.TB) { tb.Errorf("late by %d", 3) }); got != "late by 3" {
		t.Errorf("Failure after Errorf = %q", got)
	}
	after := false
	var order []int
	got := tbtest.Failure(func(tb testing.TB) {
		tb.Cleanup(func() { order = append(order, 1) })
		tb.Cleanup(func() { order = append(order, 2) })
		tb.Fatalf("stop")
		after = true
	})
	if got != "stop" || after {
		t.Errorf("Failure after Fatalf = %q, ran on: %v; want it to stop the helper", got, after)
	}
	if len(order) != 2 || order[0] != 2 || order[1] != 1 {
		t.Errorf("cleanups ran %v, want [2 1]", order)
	}
}
