package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
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

// TestAwaitRunning: a redelivery of a message whose handler runs on
// another worker waits, and each way the wait ends says what becomes of
// it: the handler returned (run it), it turned overdue or has run the
// broker's timeout (dead-letter it), the broker took the channel's
// deliveries back again (drop it), the bound passed or a stop came (give
// it back).
func TestAwaitRunning(t *testing.T) {
	t.Parallel()
	const id = "m-1"
	long := time.Hour
	tests := []struct {
		name           string
		handlerTimeout time.Duration
		broker         time.Duration // learnt before the wait; 0 none
		ranFor         time.Duration // how long the handler ran when the wait began
		then           func(e *Engine, c *consumer, running *worker)
		want           runEnd
	}{
		{"the handler returns", long, 0, 0, func(_ *Engine, _ *consumer, w *worker) { w.end() }, runEnded},
		{"the watchdog marks it overdue", long, 0, 0, func(_ *Engine, _ *consumer, w *worker) { w.limit = time.Nanosecond; w.expire(time.Now()) }, runOverdue},
		{"it reaches the broker's timeout", long, 300 * time.Millisecond, 200 * time.Millisecond, nil, runOverdue}, // before the bound, the cap of 150ms
		{"it ran the broker's timeout already", long, time.Minute, 2 * time.Minute, nil, runOverdue},
		{"the broker takes the channel back", long, 0, 0, func(_ *Engine, c *consumer, _ *worker) { c.retaken() }, runTakenBack},
		{"a stop", long, 0, 0, func(e *Engine, _ *consumer, _ *worker) { e.stop.request(time.Now()) }, runStopping},
		{"the bound", 50 * time.Millisecond, 0, 0, nil, runWaitedOut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &Engine{log: zap.NewNop(), stop: newStop(), handlerTimeout: tt.handlerTimeout}
			c := &consumer{e: e, q: &queueRun{name: "q"}}
			if tt.broker > 0 {
				e.overdue.learn("q", tt.broker)
			}
			groups := [2]*sync.WaitGroup{new(sync.WaitGroup), new(sync.WaitGroup)}
			groups[0].Add(2)
			groups[1].Add(2)
			running, self := newWorker(context.Background(), groups), newWorker(context.Background(), groups)
			c.workers = []*worker{running, self}
			d := transport.Delivery{Headers: map[string]any{"x-acemq-id": id}, Redelivered: true}
			running.begin(d, messageOf(d), time.Now().Add(-tt.ranFor), long)
			got := make(chan runEnd, 1)
			go func() {
				end, _ := c.awaitRunning(self, id)
				got <- end
			}()
			if tt.then != nil {
				polltest.Within(t, 10*time.Second, "the wait has asked for its wake-ups", func() bool {
					running.mu.Lock()
					defer running.mu.Unlock()
					return running.changed != nil
				})
				tt.then(e, c, running)
			}
			select {
			case end := <-got:
				if end != tt.want {
					t.Errorf("the wait ended %d, want %d", end, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the wait did not end")
			}
			if tt.want == runOverdue && tt.broker > 0 {
				d := transport.Delivery{Headers: map[string]any{"x-acemq-id": id}}
				if _, ok := e.overdue.take("q", messageOf(d)); !ok {
					t.Error("a handler past the broker's timeout is not remembered as overdue")
				}
			}
		})
	}
}

// TestAwaitRunningNoneRunning: a redelivery whose message no other worker
// runs does not wait.
func TestAwaitRunningNoneRunning(t *testing.T) {
	t.Parallel()
	e := &Engine{log: zap.NewNop(), stop: newStop(), handlerTimeout: time.Hour}
	c := &consumer{e: e, q: &queueRun{name: "q"}}
	groups := [2]*sync.WaitGroup{new(sync.WaitGroup), new(sync.WaitGroup)}
	self := newWorker(context.Background(), groups)
	other := newWorker(context.Background(), groups)
	c.workers = []*worker{self, other}
	d := transport.Delivery{Headers: map[string]any{"x-acemq-id": "another"}}
	other.begin(d, messageOf(d), time.Now(), time.Hour)
	if end, _ := c.awaitRunning(self, "m-1"); end != runEnded {
		t.Errorf("the wait ended %d, want runEnded at once", end)
	}
}
