package panicked_test

import (
	"testing"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/panicked"
)

func TestRetry(t *testing.T) {
	a := panicked.Retry("nil map")
	if a.Outcome() != ack.OutcomeRetry {
		t.Fatalf("outcome %v, want a retry", a.Outcome())
	}
	if got, want := a.Err().Error(), "acemq: handler panicked: nil map"; got != want || panicked.Text("nil map") != want {
		t.Errorf("error %q, text %q; want %q", got, panicked.Text("nil map"), want)
	}
}
