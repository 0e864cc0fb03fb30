package flow_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/transport/memory"
)

// A queue's breaker through a dependency's outage, on a virtual clock: the
// engine asks before each delivery, reports each answer, and logs each
// change.
func ExampleBreaker() {
	clock := memory.NewClock(time.Time{})
	t0 := clock.Now()
	b, err := flow.NewBreaker(clock, flow.BreakerSettings{}) // the defaults
	if err != nil {
		panic(err)
	}
	down := errors.New("the warehouse is not answering")
	logChange := func(ev flow.Event) {
		if ev.Changed() {
			fmt.Printf("+%s %s\n", ev.At.Sub(t0), ev)
		}
	}
	for range 20 {
		d := b.Allow()
		logChange(b.Done(d.Permit, ack.Retry(down)))
	}
	d := b.Allow()
	fmt.Printf("start: %v, ask again at +%s\n", d.Start, d.Until.Sub(t0))

	clock.Advance(time.Minute) // the engine waited on its clock for d.Until
	for range 3 {
		d := b.Allow()
		logChange(d.Event)
		logChange(b.Done(d.Permit, ack.Accept()))
	}
	// Output:
	// +0s closed → open: 20 of the last 20 failed: the warehouse is not answering
	// start: false, ask again at +1m0s
	// +1m0s open → half-open: the cool-down of 1m0s is over: probing with 1 at a time
	// +1m0s half-open → closed: 3 probes in a row succeeded
}

// A limit of 2 a second with a burst of 3, shared by whoever holds it.
func ExampleRate() {
	clock := memory.NewClock(time.Time{})
	t0 := clock.Now()
	r, err := flow.NewRate(clock, 2, 3)
	if err != nil {
		panic(err)
	}
	for range 5 {
		fmt.Printf("due at +%s\n", r.Reserve().At.Sub(t0))
	}
	// Output:
	// due at +0s
	// due at +0s
	// due at +0s
	// due at +500ms
	// due at +1s
}
