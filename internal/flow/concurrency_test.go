package flow_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport/memory"
)

// Workers reporting at once lose no outcome: the window holds exactly
// what they reported.
func TestBreakerConcurrentReportsClosed(t *testing.T) {
	t.Parallel()
	const workers, each = 8, 200
	b, err := flow.NewBreaker(memory.NewClock(time.Time{}), flow.BreakerSettings{Window: workers * each, FailureRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				d := b.Allow()
				if !d.Start {
					t.Errorf("worker %d: refused while closed", w)
					return
				}
				o := flow.Success
				switch {
				case i%4 == 0:
					o = flow.Failure
				case i%4 == 1:
					o = flow.Ignored
				}
				b.Report(d.Permit, o, errWarehouse)
			}
		})
	}
	wg.Wait()
	st := b.Status()
	if want := workers * each * 3 / 4; st.Outcomes != want || st.Failures != workers*each/4 || st.State != flow.Closed {
		t.Errorf("Status %+v, want %d outcomes, %d failures, closed", st, want, workers*each/4)
	}
}

// Workers hammering a breaker through outages and recoveries, with the
// clock moved under them: never more than one probe at a time in
// half-open, every state change a step the machine allows, and the
// breaker closed again once the dependency answers.
func TestBreakerConcurrentProbes(t *testing.T) {
	t.Parallel()
	clock := memory.NewClock(time.Time{})
	b, err := flow.NewBreaker(clock, flow.BreakerSettings{Window: 10, CoolDown: time.Second, Probes: 1, CloseAfter: 2})
	if err != nil {
		t.Fatal(err)
	}
	var (
		down     atomic.Bool
		probing  atomic.Int32
		tooMany  atomic.Int32
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		mu       sync.Mutex
		changes  = map[[2]flow.State]int{}
		allowed  = map[[2]flow.State]bool{{flow.Closed, flow.Open}: true, {flow.Open, flow.HalfOpen}: true, {flow.HalfOpen, flow.Open}: true, {flow.HalfOpen, flow.Closed}: true}
		recordEv = func(ev flow.Event) {
			if ev.Changed() {
				mu.Lock()
				changes[[2]flow.State{ev.From, ev.To}]++
				mu.Unlock()
			}
		}
	)
	down.Store(true)
	for range 6 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				d := b.Allow()
				recordEv(d.Event)
				if !d.Start {
					select {
					case <-d.Wake:
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					continue
				}
				if d.State == flow.HalfOpen {
					if probing.Add(1) > 1 {
						tooMany.Add(1)
					}
					runtime.Gosched() // a probe takes a while: let the others try
					probing.Add(-1)
				}
				o := flow.Success
				if down.Load() {
					o = flow.Failure
				}
				recordEv(b.Report(d.Permit, o, errors.New("down")))
			}
		})
	}
	// waitFor moves the clock 100 ms at a time until cond holds, letting
	// the workers run a millisecond between two moves.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if !polltest.UntilEvery(polltest.Generous, time.Millisecond, func() bool {
			if cond() {
				return true
			}
			clock.Advance(100 * time.Millisecond)
			return false
		}) {
			close(stop)
			wg.Wait()
			t.Fatalf("gave up waiting for %s; status %+v", what, b.Status())
		}
	}
	for round := range 3 {
		down.Store(true)
		waitFor("a trip", func() bool { return b.State() != flow.Closed })
		waitFor("a failed probe", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return changes[[2]flow.State{flow.HalfOpen, flow.Open}] > round
		})
		down.Store(false)
		waitFor("recovery", func() bool { return b.State() == flow.Closed })
	}
	close(stop)
	wg.Wait()
	if n := tooMany.Load(); n > 0 {
		t.Errorf("%d times more than one probe ran at once", n)
	}
	for step, n := range changes {
		if !allowed[step] {
			t.Errorf("%d changes %s→%s, which the machine does not make", n, step[0], step[1])
		}
	}
	if changes[[2]flow.State{flow.HalfOpen, flow.Closed}] != 3 {
		t.Errorf("changes %v, want three recoveries", changes)
	}
}
