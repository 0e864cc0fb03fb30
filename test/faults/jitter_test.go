package faults_test

import (
	"testing"
	"time"

	"github.com/acemq/acemq/retry"
)

// TestFaultJitterOverflow: an exponential policy with no cap whose delay
// grows past time.Duration's range, jittered by up to 1.2, must not
// overflow into a negative wait (a retry at once, every attempt: a hot loop).
func TestFaultJitterOverflow(t *testing.T) {
	p := retry.Exponential(64, time.Second, 0).WithBrokerWaitThreshold(0)
	for attempt := 30; attempt < 64; attempt++ {
		for range 50 {
			if w, ok := p.NextWait(attempt, 0); ok && w.Delay < 0 {
				t.Fatalf("Exponential(64, 1s, 0): NextWait(%d) = %v", attempt, w.Delay)
			}
		}
	}
}
