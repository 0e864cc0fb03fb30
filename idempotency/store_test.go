package idempotency_test

import (
	"testing"

	"github.com/acemq/acemq/idempotency"
)

func TestClaimResultString(t *testing.T) {
	t.Parallel()
	for r, want := range map[idempotency.ClaimResult]string{
		0:                      "ClaimResult(0)",
		idempotency.Claimed:    "claimed",
		idempotency.Done:       "done",
		idempotency.InProgress: "in progress",
		9:                      "ClaimResult(9)",
	} {
		if got := r.String(); got != want {
			t.Errorf("ClaimResult(%d).String() = %q, want %q", uint8(r), got, want)
		}
	}
}
