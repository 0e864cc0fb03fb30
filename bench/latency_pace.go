package main

import (
	"context"
	"time"
)

// The latency scenario's open-loop pacer: message i is handed to a
// publisher at t0 + i/rate, whatever happens downstream (latency.go).

// dueOffset is when message i is due after t0 at rate msgs/s.
func dueOffset(i int, rate float64) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / rate)
}

// pace hands 0..n-1 to out, each at t0 + dueOffset(i, rate) or as soon
// after as it wakes, never waiting for anything downstream: out has room
// for all n. It returns early when ctx ends.
func pace(ctx context.Context, t0 time.Time, rate float64, n int, out chan<- int) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := range n {
		if d := time.Until(t0.Add(dueOffset(i, rate))); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		out <- i
	}
}
