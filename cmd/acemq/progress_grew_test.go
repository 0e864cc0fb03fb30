package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestProgressQueueGrew: a count past the total counted at the start (the
// queue grew while it was read) is said as such, never as a percentage over
// 100 nor with a time left.
func TestProgressQueueGrew(t *testing.T) {
	t.Parallel()
	var errOut bytes.Buffer
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	a := &app{stderr: &errOut, now: func() time.Time { now = now.Add(time.Second); return now }}
	p := a.newProgress("orders.dlq -> archive.jsonl: moved", 909, time.Millisecond)
	p.set(454)
	p.set(4541)
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "moved 454 of 909 (49%)") ||
		!strings.Contains(lines[1], "moved 4541 (909 were counted at the start: the queue grew while it was read)") ||
		strings.Contains(lines[1], "%") || strings.Contains(lines[1], "ETA") {
		t.Errorf("progress:\n%s", errOut.String())
	}
}
