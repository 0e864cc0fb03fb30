package flow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/flow"
)

// The benchmarks measure what each limiter costs a delivery when it is
// not limiting, and report it as a ratio against an empty loop measured
// in the same run (x-empty-loop), so that the figure survives a slower or
// busier machine.

var sink int

// emptyLoopNanos times an empty loop (a store a turn, so that it stays a
// loop) of at least n turns, five times, and returns the fastest's
// nanoseconds a turn: on a shared machine the slower runs measure the
// neighbours.
func emptyLoopNanos(n int) float64 {
	n = max(n, 1<<22)
	best := time.Duration(1<<63 - 1)
	for range 5 {
		start := time.Now()
		for i := 0; i < n; i++ {
			sink = i
		}
		best = min(best, time.Since(start))
	}
	return float64(best.Nanoseconds()) / float64(n)
}

// reportRatio reports the benchmark's time an op against an empty loop
// timed now, in the same run.
func reportRatio(b *testing.B) {
	b.Helper()
	b.StopTimer()
	per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	if base := emptyLoopNanos(b.N); base > 0 {
		b.ReportMetric(per/base, "x-empty-loop")
	}
}

func BenchmarkEmptyLoop(b *testing.B) {
	for i := 0; i < b.N; i++ {
		sink = i
	}
	reportRatio(b)
}

func closedBreaker(b *testing.B, ratio float64) *flow.Breaker {
	b.Helper()
	br, err := flow.NewBreaker(wallClock{}, flow.BreakerSettings{Window: 100, FailureRatio: ratio})
	if err != nil {
		b.Fatal(err)
	}
	return br
}

// Allow and Report of a success on a closed breaker: the hot path.
func BenchmarkBreakerClosed(b *testing.B) {
	br := closedBreaker(b, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := br.Allow()
		br.Report(d.Permit, flow.Success, nil)
	}
	reportRatio(b)
}

// One failure in four, below the ratio: the window's bookkeeping.
func BenchmarkBreakerClosedFailures(b *testing.B) {
	br := closedBreaker(b, 0.5)
	err := errors.New("down")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := br.Allow()
		o := flow.Success
		if i%4 == 0 {
			o = flow.Failure
		}
		br.Report(d.Permit, o, err)
	}
	reportRatio(b)
}

// Done with a handler's Accept: what the engine would call.
func BenchmarkBreakerClosedDone(b *testing.B) {
	br := closedBreaker(b, 1)
	a := ack.Accept()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		br.Done(br.Allow().Permit, a)
	}
	reportRatio(b)
}

// The workers of one queue at once on one breaker.
func BenchmarkBreakerClosedParallel(b *testing.B) {
	br := closedBreaker(b, 1)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			d := br.Allow()
			br.Report(d.Permit, flow.Success, nil)
		}
	})
	reportRatio(b)
}

// Take on a rate with plenty of tokens (the wall clock, read each call).
func BenchmarkRatePlenty(b *testing.B) {
	r, err := flow.NewRate(wallClock{}, 1e9, 1<<30)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if ok, _ := r.Take(); !ok {
			b.Fatal("out of tokens")
		}
	}
	reportRatio(b)
}

// Wait on a rate with plenty of tokens: returns at once.
func BenchmarkRateWaitPlenty(b *testing.B) {
	r, err := flow.NewRate(wallClock{}, 1e9, 1<<30)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportRatio(b)
}

// Acquire and Release on a group under its cap.
func BenchmarkGroupUnderCap(b *testing.B) {
	g, err := flow.NewGroup("bench", 64)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	stop := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := g.Acquire(ctx, stop); err != nil {
			b.Fatal(err)
		}
		g.Release()
	}
	reportRatio(b)
}

// A wall clock's Now, for scale: what the rate pays before its own work.
func BenchmarkClockNow(b *testing.B) {
	var c wallClock
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = c.Now()
	}
	reportRatio(b)
}
