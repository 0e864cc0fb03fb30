package acemqtest_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/ack"
)

// TestThrottleRunsOnTheVirtualClock: a throttled queue holding more
// prefetched deliveries than its workers is still quiet while they wait
// for tokens, so RunUntilIdle moves the clock token by token: ten orders at
// two a second take 4.5 s of the virtual clock.
func TestThrottleRunsOnTheVirtualClock(t *testing.T) {
	var handled atomic.Int64
	mux := acemq.NewMux()
	mux.HandleFunc("orders", func(context.Context, *acemq.Message) ack.Ack {
		handled.Add(1)
		return ack.Accept()
	})
	ts := acemqtest.NewServer(t, mux, &acemq.Server{
		Throttles: map[string]acemq.Throttle{"warehouse": {PerSecond: 2, Burst: 1}},
		Queues:    map[string]acemq.QueueConfig{"orders": {Throttles: []string{"warehouse"}, Concurrency: 2, Prefetch: 8}},
	})
	began := ts.Broker.Clock().Now()
	for i := range 10 {
		ts.Publish(t, "orders", fmt.Sprint(i))
	}
	ts.RunUntilIdle(t)
	if n := handled.Load(); n != 10 {
		t.Fatalf("%d of 10 handled", n)
	}
	if took := ts.Broker.Clock().Now().Sub(began); took.Seconds() != 4.5 {
		t.Errorf("ten orders at two a second took %v of the virtual clock, want 4.5s", took)
	}
}

// TestThrottleGroupRunsOnTheVirtualClock: two queues sharing a cap of one
// handler at once, each handler a second of work on the virtual clock:
// the deliveries waiting for the slot are quiet too, and the eight orders
// and refunds take eight seconds, one after another.
func TestThrottleGroupRunsOnTheVirtualClock(t *testing.T) {
	var handled, running, most atomic.Int64
	var ts *acemqtest.Server
	work := func(context.Context, *acemq.Message) ack.Ack {
		if n := running.Add(1); n > most.Load() {
			most.Store(n)
		}
		<-ts.Broker.Clock().After(time.Second)
		running.Add(-1)
		handled.Add(1)
		return ack.Accept()
	}
	mux := acemq.NewMux()
	mux.HandleFunc("orders", work)
	mux.HandleFunc("refunds", work)
	ts = acemqtest.NewServer(t, mux, &acemq.Server{
		Throttles: map[string]acemq.Throttle{"ledger": {Concurrency: 1}},
		Queues: map[string]acemq.QueueConfig{
			"orders":  {Throttles: []string{"ledger"}, Concurrency: 2, Prefetch: 4},
			"refunds": {Throttles: []string{"ledger"}, Concurrency: 2, Prefetch: 4},
		},
	})
	began := ts.Broker.Clock().Now()
	for i := range 4 {
		ts.Publish(t, "orders", fmt.Sprint(i))
		ts.Publish(t, "refunds", fmt.Sprint(i))
	}
	ts.RunUntilIdle(t)
	if n := handled.Load(); n != 8 {
		t.Fatalf("%d of 8 handled", n)
	}
	if most.Load() != 1 {
		t.Errorf("%d handlers ran at once under a cap of 1", most.Load())
	}
	if took := ts.Broker.Clock().Now().Sub(began); took != 8*time.Second {
		t.Errorf("eight seconds of work one at a time took %v of the virtual clock", took)
	}
}
