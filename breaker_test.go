package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

// warehouse is a handler whose dependency is down while down is set: it
// retries every message then, and accepts it once the dependency is back.
type warehouse struct {
	down     atomic.Bool
	running  atomic.Int64
	failures atomic.Int64
	mu       sync.Mutex
	accepted map[string]int
}

func newWarehouse() *warehouse { return &warehouse{accepted: map[string]int{}} }

func (w *warehouse) ServeMessage(_ context.Context, m *acemq.Message) ack.Ack {
	w.running.Add(1)
	defer w.running.Add(-1)
	if w.down.Load() {
		w.failures.Add(1)
		return ack.Retry(errors.New("the warehouse is not answering"))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.accepted[string(m.Body())]++
	return ack.Accept()
}

func (w *warehouse) acceptedOnce(n int) (all bool, twice []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, k := range w.accepted {
		if k > 1 {
			twice = append(twice, id)
		}
	}
	return len(w.accepted) == n, twice
}

// quiet waits until everything the server holds of queue q is asleep on
// the virtual clock: no handler running, and every unacknowledged
// delivery an in-process wait (plus the breaker's own wait while open), so
// that the next step of the clock finds the run where a real clock would.
func quiet(t *testing.T, b *memory.Broker, w *warehouse, q string, extra func() int) {
	t.Helper()
	polltest.Eventually(t, "the run asleep on the clock", func() bool {
		return w.running.Load() == 0 && b.Unacked(q)+extra() == b.Clock().Pending()
	})
}

// outage runs the warehouse down for ten minutes of the virtual clock
// under a steady arrival of one order every 10 s, then up again, and
// returns how many orders ended in orders.dlq once every order was
// accepted or dead-lettered.
func outage(t *testing.T, breaker *acemq.Breaker) (deadLettered int, w *warehouse, f *fixture) {
	b := memory.New()
	w = newWarehouse()
	w.down.Store(true)
	f = startOn(t, b, &acemq.Server{
		Retry:       retry.Fixed(5, 10*time.Second).WithJitter(0).WithBrokerWaitThreshold(time.Hour), // every wait in the process
		Concurrency: 2,
		Queues:      map[string]acemq.QueueConfig{"orders": {Breaker: breaker}},
	}, map[string]acemq.Handler{"orders": w})
	open := func() int { // the breaker's cool-down wait while it is open
		if breaker != nil && f.logs.FilterMessageSnippet("breaker opened").Len() > f.logs.FilterMessageSnippet("breaker probes").Len() {
			return 1
		}
		return 0
	}
	const orders = 60
	for sec := range 600 {
		if sec%10 == 0 {
			f.publish("orders", fmt.Sprintf("order-%02d", sec/10), nil)
		}
		quiet(t, b, w, "orders", open)
		b.Clock().Advance(time.Second)
	}
	w.down.Store(false)
	for sec := 0; ; sec++ {
		quiet(t, b, w, "orders", open)
		all, _ := w.acceptedOnce(orders - b.Depth("orders.dlq"))
		if all && b.Depth("orders")+b.Unacked("orders") == 0 {
			break
		}
		if sec > 1200 {
			t.Fatalf("20 minutes after the recovery: %d accepted, %d dead-lettered, %d in the queue", len(w.accepted), b.Depth("orders.dlq"), b.Depth("orders"))
		}
		b.Clock().Advance(time.Second)
	}
	if _, twice := w.acceptedOnce(0); len(twice) > 0 {
		t.Errorf("accepted more than once: %v", twice)
	}
	return b.Depth("orders.dlq"), w, f
}

// TestBreakerTenMinuteOutage: a dependency down for ten minutes under a
// steady arrival. Without a breaker the ladder runs every order through
// its five attempts into the .dlq; with one, the first failures trip it,
// the orders wait in the broker, one probe a minute fails, and once the
// dependency is back every order is accepted, once, none dead-lettered.
func TestBreakerTenMinuteOutage(t *testing.T) {
	t.Parallel()
	without, wo, _ := outage(t, nil)
	with, wb, f := outage(t, &acemq.Breaker{Window: 5, MinOutcomes: 5, CoolDown: time.Minute})
	t.Logf("dead-lettered: %d of 60 without a breaker (%d failed attempts), %d with one (%d failed attempts)",
		without, wo.failures.Load(), with, wb.failures.Load())
	if with != 0 {
		t.Errorf("%d orders dead-lettered with the breaker, want none", with)
	}
	if without < 50 {
		t.Errorf("%d orders dead-lettered without the breaker: the scenario does not burn the ladder", without)
	}
	if n := f.logs.FilterMessageSnippet("breaker opened").Len(); n < 5 {
		t.Errorf("the breaker opened %d times in ten minutes, want about one a minute (each probe fails)", n)
	}
	f.counterReaches(acemq.MetricBreaker, map[string]string{"queue": "orders", "state": "closed"}, 1)
}
