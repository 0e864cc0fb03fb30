package faults_test

import "testing"

// Scenario 5 with the full script: messages that need a republish while
// the broker blocks publishes are held (not given back into a hot loop), and
// a transport that had not published when the alarm started does not hang.

// TestFaultBlockedRepublish: while the publish connection is blocked,
// messages that need a republish are held, not redelivered over and over,
// and the rest is consumed beside them.
func TestFaultBlockedRepublish(t *testing.T) {
	blocked(t, "blocked-republish", jobs("blocked-republish", 300), true)
}

// TestFaultBlockedColdTransport: a server whose transport has not
// published yet when the alarm starts. Opening its publish channels waits
// on a broker that does not read; the open honours the publish's context,
// so no worker hangs and Shutdown's deadline is kept.
func TestFaultBlockedColdTransport(t *testing.T) {
	blocked(t, "blocked-cold", jobs("blocked-cold", 300), false)
}
