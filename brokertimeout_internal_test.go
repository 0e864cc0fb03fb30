package acemq

import (
	"testing"
	"time"
)

// TestCapBelow: the cap a broker's consumer timeout puts on a queue's
// handlers leaves a tenth of it, at least 5 s (half, below 10 s), for the
// settlement to reach the broker.
func TestCapBelow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ timeout, want time.Duration }{
		{30 * time.Minute, 27 * time.Minute},
		{15 * time.Minute, 13*time.Minute + 30*time.Second},
		{5 * time.Minute, 4*time.Minute + 30*time.Second},
		{time.Minute, 54 * time.Second},
		{30 * time.Second, 25 * time.Second},
		{10 * time.Second, 5 * time.Second},
		{time.Second, 500 * time.Millisecond},
	} {
		if got := capBelow(tt.timeout); got != tt.want {
			t.Errorf("capBelow(%v) = %v, want %v", tt.timeout, got, tt.want)
		}
		if got := capBelow(tt.timeout); got <= 0 || got >= tt.timeout {
			t.Errorf("capBelow(%v) = %v, not between 0 and the timeout", tt.timeout, got)
		}
	}
}

// TestDeclaredTimeout: x-consumer-timeout is read from the arguments the
// server declares a queue with, in any integer type a table may carry;
// anything else, or a queue the server does not declare, says nothing.
func TestDeclaredTimeout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		declare bool
		v       any
		want    time.Duration
	}{
		{"int", true, 60000, time.Minute},
		{"int32", true, int32(1000), time.Second},
		{"int64", true, int64(900000), 15 * time.Minute},
		{"uint16", true, uint16(5000), 5 * time.Second},
		{"float64 from JSON", true, float64(2000), 2 * time.Second},
		{"not declared by the server", false, 60000, 0},
		{"zero", true, 0, 0},
		{"negative", true, -5, 0},
		{"a string", true, "60000", 0},
		{"absent", true, nil, 0},
		{"beyond a Duration", true, float64(1e300), 0},
	} {
		q := &queueRun{name: "q", declare: tt.declare, args: map[string]any{}}
		if tt.v != nil {
			q.args["x-consumer-timeout"] = tt.v
		}
		if got := declaredTimeout(q); got != tt.want {
			t.Errorf("%s: declaredTimeout = %v, want %v", tt.name, got, tt.want)
		}
	}
}
