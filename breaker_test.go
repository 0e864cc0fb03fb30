package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
func quiet(t *testing.T, f *fixture, w *warehouse, q string) {
	t.Helper()
	polltest.Eventually(t, "the run asleep on the clock", func() bool {
		cooling := 0
		for _, st := range f.srv.Breakers() {
			switch {
			case st.CoolingDown:
				cooling++
			case st.Switching: // cancelling or consuming again: not asleep yet
				return false
			}
		}
		return w.running.Load() == 0 && f.broker.Unacked(q)+cooling == f.broker.Clock().Pending()
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
	const orders = 60
	for sec := range 600 {
		if sec%10 == 0 {
			f.publish("orders", fmt.Sprintf("order-%02d", sec/10), nil)
		}
		quiet(t, f, w, "orders")
		b.Clock().Advance(time.Second)
	}
	w.down.Store(false)
	for sec := 0; ; sec++ {
		quiet(t, f, w, "orders")
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

// TestBreakerMessageFaultsDoNotCount: while the breaker is tripping and
// open, a message failing for its own reason (a fatal error, a
// rejection) is dead-lettered at once as ever, and does not count against
// the dependency: a stream of them alone never opens the breaker.
func TestBreakerMessageFaultsDoNotCount(t *testing.T) {
	t.Parallel()
	h := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		switch string(m.Body()) {
		case "fatal":
			return ack.Retry(ack.Fatal(errors.New("card closed")))
		case "rejected":
			return ack.DeadLetter(errors.New("no such customer"))
		}
		return ack.Accept()
	})
	f := start(t, &acemq.Server{
		Retry:  retry.Fixed(5, 10*time.Second),
		Queues: map[string]acemq.QueueConfig{"orders": {Breaker: &acemq.Breaker{Window: 3, MinOutcomes: 3}}},
	}, map[string]acemq.Handler{"orders": h})
	for i := range 10 {
		f.publish("orders", []string{"fatal", "rejected"}[i%2], nil)
	}
	f.eventually("all ten dead-lettered", func() bool { return f.broker.Depth("orders.dlq") == 10 })
	f.publish("orders", "fine", nil)
	f.eventually("the next order accepted", func() bool {
		return f.broker.Depth("orders")+f.broker.Unacked("orders") == 0 && f.counter(acemq.MetricHandled, map[string]string{"outcome": "accept"}) == 1
	})
	if n := f.logs.FilterMessageSnippet("breaker opened").Len(); n != 0 {
		t.Errorf("the breaker opened %d times on messages' own faults", n)
	}
}

// TestBreakerCounts: the user's predicate says which errors are the
// dependency's: here only a 503, so 500s never open the breaker and 503s do.
func TestBreakerCounts(t *testing.T) {
	t.Parallel()
	unavailable := errors.New("503 service unavailable")
	h := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		if string(m.Body()) == "503" {
			return ack.Retry(unavailable)
		}
		return ack.Retry(errors.New("500 internal error"))
	})
	f := start(t, &acemq.Server{
		Retry: retry.Fixed(2, time.Second).WithJitter(0).WithBrokerWaitThreshold(time.Hour),
		Queues: map[string]acemq.QueueConfig{"orders": {Breaker: &acemq.Breaker{Window: 3, MinOutcomes: 3,
			Counts: func(err error) bool { return errors.Is(err, unavailable) }}}},
	}, map[string]acemq.Handler{"orders": h})
	for range 3 {
		f.publish("orders", "500", nil)
	}
	f.eventually("the 500s on their first wait", func() bool { return f.broker.Clock().Pending() >= 3 })
	f.broker.Clock().Advance(time.Second)
	f.eventually("the 500s dead-lettered", func() bool { return f.broker.Depth("orders.dlq") == 3 })
	if n := f.logs.FilterMessageSnippet("breaker opened").Len(); n != 0 {
		t.Fatalf("the breaker opened on errors its predicate does not count")
	}
	for range 3 {
		f.publish("orders", "503", nil)
	}
	f.eventually("the breaker opened on the 503s", func() bool { return f.logs.FilterMessageSnippet("breaker opened").Len() == 1 })
	if err := f.srv.CheckReady(); err == nil || !strings.Contains(err.Error(), "every queue's breaker is open: queue orders: its breaker is open since") {
		t.Errorf("CheckReady = %v, want not ready, naming the open breaker", err)
	}
	if err := f.srv.CheckLive(); err != nil {
		t.Errorf("CheckLive = %v: an open breaker is alive", err)
	}
}

// TestBreakerDoesNotDelayShutdown: a stop while the breaker is open (the
// supervisor waiting out its cool-down, retries held) ends at once: Run
// returns nil well inside the deadline, and every message is in the broker.
func TestBreakerDoesNotDelayShutdown(t *testing.T) {
	t.Parallel()
	w := newWarehouse()
	w.down.Store(true)
	f := start(t, &acemq.Server{
		Retry:  retry.Fixed(5, 10*time.Second).WithJitter(0).WithBrokerWaitThreshold(time.Hour),
		Queues: map[string]acemq.QueueConfig{"orders": {Breaker: &acemq.Breaker{Window: 2, MinOutcomes: 2, CoolDown: time.Hour}}},
	}, map[string]acemq.Handler{"orders": w})
	for i := range 6 {
		f.publish("orders", fmt.Sprint(i), nil)
	}
	f.eventually("the breaker open", func() bool { return f.logs.FilterMessageSnippet("breaker opened").Len() == 1 })
	shutdownErr, runErr := f.stop(10 * time.Second)
	if shutdownErr != nil || runErr != nil {
		t.Fatalf("Shutdown %v, Run %v: want a clean stop", shutdownErr, runErr)
	}
	if n := f.broker.Depth("orders") + f.broker.Depth("orders.dlq"); n != 6 {
		t.Errorf("%d of 6 messages in the broker after the stop (orders %d, dlq %d)", n, f.broker.Depth("orders"), f.broker.Depth("orders.dlq"))
	}
	if d := f.broker.Depth("orders.dlq"); d != 0 {
		t.Errorf("%d dead-lettered", d)
	}
}

// TestBreakerSettingsRefused: Run refuses a breaker setting out of range,
// naming the queue and the setting.
func TestBreakerSettingsRefused(t *testing.T) {
	t.Parallel()
	b := memory.New()
	defer b.Close()
	conn := b.Connect()
	defer conn.Close()
	mux := acemq.NewMux()
	mux.HandleFunc("orders", func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })
	srv := &acemq.Server{Transport: conn, Handler: mux, Breaker: &acemq.Breaker{FailureRatio: 1.5}}
	err := srv.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the breaker of queue orders") || !strings.Contains(err.Error(), "failure ratio 1.5") {
		t.Fatalf("Run = %v, want the breaker's setting refused", err)
	}
}

// TestBreakerHeldTimeIsNotAge: a policy's maximum age is judged on the
// time a message spent on its own retries, not on the time the breaker
// kept it waiting in the broker: two orders held through a 20-minute
// outage by a breaker are retried after it, under a maximum age of five
// minutes, instead of being given up on as too old.
func TestBreakerHeldTimeIsNotAge(t *testing.T) {
	t.Parallel()
	b := memory.New()
	w := newWarehouse()
	w.down.Store(true)
	f := startOn(t, b, &acemq.Server{
		Retry:  retry.Fixed(5, 10*time.Second).WithJitter(0).WithBrokerWaitThreshold(time.Hour).WithMaxAge(5 * time.Minute),
		Queues: map[string]acemq.QueueConfig{"orders": {Breaker: &acemq.Breaker{Window: 2, MinOutcomes: 2, CoolDown: 10 * time.Minute}}},
	}, map[string]acemq.Handler{"orders": w})
	f.publish("orders", "order-1", nil)
	f.publish("orders", "order-2", nil)
	f.eventually("the breaker open", func() bool { return f.logs.FilterMessageSnippet("breaker opened").Len() == 1 })
	for sec := 0; sec < 20*60; sec++ { // the first probe after 10 minutes fails too
		quiet(t, f, w, "orders")
		b.Clock().Advance(time.Second)
	}
	w.down.Store(false)
	for sec := 0; ; sec++ {
		quiet(t, f, w, "orders")
		if all, _ := w.acceptedOnce(2); all {
			break
		}
		if sec > 30*60 {
			t.Fatalf("not both accepted: %v, dlq %d", w.accepted, b.Depth("orders.dlq"))
		}
		b.Clock().Advance(time.Second)
	}
	if d := b.Depth("orders.dlq"); d != 0 {
		t.Errorf("%d given up on (reason %q): the breaker's time counted as age", d, reasonIn(f, "orders.dlq"))
	}
}
