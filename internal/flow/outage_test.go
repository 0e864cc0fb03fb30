package flow_test

import (
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/transport/memory"
)

// With the defaults, a dependency down for ten minutes under a steady
// arrival of ten messages a second costs the window's 20 attempts to trip
// and then one probe a cool-down: what the breaker promises the ladder.
// The engine's own scenario (messages handled after recovery, none
// dead-lettered) is the integration's to show; this is the arithmetic it
// rests on.
func TestBreakerBoundsAttemptsDuringAnOutage(t *testing.T) {
	t.Parallel()
	clock := memory.NewClock(time.Time{})
	t0 := clock.Now()
	b, err := flow.NewBreaker(clock, flow.BreakerSettings{})
	if err != nil {
		t.Fatal(err)
	}
	down := errors.New("the warehouse is not answering")
	const outage, every = 10 * time.Minute, 100 * time.Millisecond
	attempts, refused := 0, 0
	for clock.Now().Sub(t0) < outage {
		d := b.Allow()
		if !d.Start {
			refused++
			clock.Advance(every)
			continue
		}
		attempts++
		b.Done(d.Permit, ack.Retry(down))
		clock.Advance(every)
	}
	want := flow.DefaultMinOutcomes + int(outage/flow.DefaultCoolDown) - 1 // a probe at each whole minute after the trip but the last
	if attempts > want+1 || attempts < want {
		t.Errorf("%d attempts spent during a 10-minute outage, want about %d (the window, then one probe a minute)", attempts, want)
	}
	t.Logf("10-minute outage at 10/s: %d attempts spent, Allow refused %d times", attempts, refused)
	// The dependency is back: the next probes close it.
	clock.Advance(flow.DefaultCoolDown)
	for range flow.DefaultCloseAfter {
		d := b.Allow()
		if !d.Start {
			t.Fatalf("refused after recovery: %+v", d)
		}
		b.Done(d.Permit, ack.Accept())
	}
	if b.State() != flow.Closed {
		t.Fatalf("state %s after %d successes", b.State(), flow.DefaultCloseAfter)
	}
}
