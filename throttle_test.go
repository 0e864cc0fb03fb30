package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport/memory"
)

// TestThrottleRate: a throttle of 2 a second with no burst lets one
// handler start every 500 ms of the server's (virtual) clock, never
// sooner, whatever the queue's concurrency; the messages held back wait
// in the prefetch, not in a handler.
func TestThrottleRate(t *testing.T) {
	t.Parallel()
	b := memory.New()
	clock := b.Clock()
	var mu sync.Mutex
	var began []time.Time
	h := acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
		mu.Lock()
		began = append(began, clock.Now())
		mu.Unlock()
		return ack.Accept()
	})
	started := func() int { mu.Lock(); defer mu.Unlock(); return len(began) }
	srv := &acemq.Server{
		Concurrency: 4,
		Prefetch:    4, // every unsettled delivery is a worker's: quiet below can count them
		Throttles:   map[string]acemq.Throttle{"api": {PerSecond: 2}},
		Queues:      map[string]acemq.QueueConfig{"q": {Throttles: []string{"api"}}},
	}
	f := startOn(t, b, srv, map[string]acemq.Handler{"q": h})
	const n = 6
	for i := range n {
		f.publish("q", fmt.Sprint(i), nil)
	}
	t0 := clock.Now()
	// The run is asleep when every delivery it holds waits on the clock
	// for a token; only then does the clock move, as a real one would.
	quiet := func() {
		t.Helper()
		f.eventually("every held delivery asleep on the clock", func() bool {
			return b.Unacked("q") == clock.Pending()
		})
	}
	for step := 0; started() < n; step++ {
		if step > 40 {
			t.Fatalf("%d of %d started after %s of the clock", started(), n, clock.Now().Sub(t0))
		}
		quiet()
		clock.Advance(100 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, at := range began {
		if early := time.Duration(i)*500*time.Millisecond - at.Sub(t0); early > 0 {
			t.Errorf("handler %d started at %s, %s before the rate allows", i, at.Sub(t0), early)
		}
	}
	if took := began[n-1].Sub(t0); took > time.Duration(n-1)*500*time.Millisecond+100*time.Millisecond {
		t.Errorf("the last of %d started at %s, slower than 2 a second", n, took)
	}
	// Every start but the first waited for a token, and is recorded so.
	if waits, _ := f.histogram(acemq.MetricThrottleWait, map[string]string{"queue": "q", "throttle": "api", "limit": "rate"}); waits != n-1 {
		t.Errorf("%d throttle waits recorded, want %d", waits, n-1)
	}
}

// TestThrottleConcurrencySharedByTwoQueues: a throttle of 2 at once named
// by two queues lets at most two of their handlers run together, though
// each queue runs four; a third queue, under no throttle, runs beside
// them unhindered; every message is handled once released.
func TestThrottleConcurrencySharedByTwoQueues(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var mu sync.Mutex
	running, most, handled := 0, 0, map[string]int{}
	blocking := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		<-release
		mu.Lock()
		running--
		handled[m.Queue()]++
		mu.Unlock()
		return ack.Accept()
	})
	free := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		mu.Lock()
		handled[m.Queue()]++
		mu.Unlock()
		return ack.Accept()
	})
	srv := &acemq.Server{
		Concurrency: 4,
		Throttles:   map[string]acemq.Throttle{"warehouse": {Concurrency: 2}},
		Queues: map[string]acemq.QueueConfig{
			"orders":  {Throttles: []string{"warehouse"}},
			"refunds": {Throttles: []string{"warehouse"}},
		},
	}
	f := start(t, srv, map[string]acemq.Handler{"orders": blocking, "refunds": blocking, "audit": free})
	for i := range 5 {
		f.publish("orders", fmt.Sprint(i), nil)
		f.publish("refunds", fmt.Sprint(i), nil)
		f.publish("audit", fmt.Sprint(i), nil)
	}
	count := func(q string) int { mu.Lock(); defer mu.Unlock(); return handled[q] }
	f.eventually("two handlers running, and the audit queue handled beside them", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return running == 2 && handled["audit"] == 5
	})
	close(release)
	f.eventually("every message handled", func() bool { return count("orders") == 5 && count("refunds") == 5 })
	mu.Lock()
	defer mu.Unlock()
	if most != 2 {
		t.Errorf("at most %d handlers ran at once under a throttle of 2", most)
	}
}

// TestThrottleStop: a stop while workers wait for the rate ends the wait
// at once; the messages held back go back to the broker, none handled.
func TestThrottleStop(t *testing.T) {
	t.Parallel()
	b := memory.New()
	var mu sync.Mutex
	handled := 0
	h := acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
		mu.Lock()
		handled++
		mu.Unlock()
		return ack.Accept()
	})
	srv := &acemq.Server{
		Throttles: map[string]acemq.Throttle{"slow": {PerSecond: 1.0 / 3600}},
		Queues:    map[string]acemq.QueueConfig{"q": {Throttles: []string{"slow"}}},
	}
	f := startOn(t, b, srv, map[string]acemq.Handler{"q": h})
	for i := range 4 {
		f.publish("q", fmt.Sprint(i), nil)
	}
	f.eventually("the first handled, the rest held back", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled == 1 && b.Depth("q")+b.Unacked("q") == 3
	})
	shutdownErr, runErr := f.stop(5 * time.Second)
	if shutdownErr != nil || runErr != nil {
		t.Fatalf("Shutdown %v, Run %v: want a clean stop, no handler was running", shutdownErr, runErr)
	}
	if got := b.Depth("q"); got != 3 {
		t.Errorf("q holds %d after the stop, want the 3 held back", got)
	}
}

// TestThrottleSettingsRefused: Run refuses a throttle that throttles
// nothing or has a negative setting, and a queue naming a throttle the
// server does not have, or one twice, naming what is wrong.
func TestThrottleSettingsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		throttles map[string]acemq.Throttle
		names     []string
		want      string
	}{
		{"nothing set", map[string]acemq.Throttle{"api": {}}, []string{"api"}, `Server.Throttles["api"]: neither PerSecond nor Concurrency is set`},
		{"negative rate", map[string]acemq.Throttle{"api": {PerSecond: -1}}, []string{"api"}, `Server.Throttles["api"]: PerSecond -1`},
		{"negative cap", map[string]acemq.Throttle{"api": {Concurrency: -2}}, []string{"api"}, `Server.Throttles["api"]: Concurrency -2`},
		{"unknown name", map[string]acemq.Throttle{"api": {PerSecond: 1}}, []string{"apl"}, `Server.Queues["q"].Throttles names "apl", which Server.Throttles does not have (it has "api")`},
		{"named twice", map[string]acemq.Throttle{"api": {PerSecond: 1}}, []string{"api", "api"}, `names "api" twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := memory.New()
			defer b.Close()
			conn := b.Connect()
			defer conn.Close()
			mux := acemq.NewMux()
			mux.HandleFunc("q", func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })
			srv := &acemq.Server{Transport: conn, Handler: mux, Throttles: tt.throttles,
				Queues: map[string]acemq.QueueConfig{"q": {Throttles: tt.names}}}
			err := srv.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want an error containing %q", err, tt.want)
			}
			if errors.Is(err, acemq.ErrServerClosed) || slices.Contains([]string{""}, err.Error()) {
				t.Fatalf("Run = %v", err)
			}
		})
	}
}
