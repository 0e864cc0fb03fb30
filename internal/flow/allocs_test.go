//go:build !race

package flow_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/flow"
)

// Nothing a delivery does on a limiter that is not limiting allocates:
// the promise the engine's hot path is built on (the race detector
// allocates on its own, hence the build tag).
func TestNoAllocationsWhenNotLimiting(t *testing.T) {
	br, err := flow.NewBreaker(wallClock{}, flow.BreakerSettings{Window: 100, FailureRatio: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	r, err := flow.NewRate(wallClock{}, 1e9, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	g, err := flow.NewGroup("allocs", 4)
	if err != nil {
		t.Fatal(err)
	}
	down := errors.New("down")
	accept, retry := ack.Accept(), ack.Retry(down)
	i := 0
	tests := []struct {
		name string
		f    func()
	}{
		{"breaker: allow and a success", func() { br.Report(br.Allow().Permit, flow.Success, nil) }},
		{"breaker: allow and a failure below the ratio", func() {
			i++
			o := flow.Success
			if i%4 == 0 {
				o = flow.Failure
			}
			br.Report(br.Allow().Permit, o, down)
		}},
		{"breaker: allow and ignored", func() { br.Report(br.Allow().Permit, flow.Ignored, down) }},
		{"breaker: done with an answer", func() {
			i++
			a := accept
			if i%4 == 0 {
				a = retry
			}
			br.Done(br.Allow().Permit, a)
		}},
		{"rate: take", func() { r.Take() }},
		{"rate: wait with a token there", func() { _ = r.Wait(context.Background()) }},
		{"group: acquire and release", func() { _ = g.Acquire(context.Background(), nil); g.Release() }},
		{"group: try and release", func() { g.TryAcquire(); g.Release() }},
	}
	for _, tt := range tests {
		if n := testing.AllocsPerRun(1000, tt.f); n != 0 {
			t.Errorf("%s: %v allocations a call, want 0", tt.name, n)
		}
	}
	if br.State() != flow.Closed {
		t.Fatalf("the breaker tripped: %+v", br.Status())
	}
}
