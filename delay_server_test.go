package acemq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// answers is a handler that gives the scripted answers in turn (the last
// one for ever after) and records each delivery's envelope.
type answers struct {
	mu   sync.Mutex
	acks []ack.Ack
	seen []acemq.Envelope
}

func (a *answers) ServeMessage(_ context.Context, m *acemq.Message) ack.Ack {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, m.Envelope())
	n := min(len(a.seen), len(a.acks)) - 1
	return a.acks[n]
}

func (a *answers) deliveries() []acemq.Envelope {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]acemq.Envelope(nil), a.seen...)
}

// onLevel reports which level queue holds exactly one message, "" if none.
func onLevel(b *memory.Broker) string {
	for k := range delay.Levels {
		if b.Depth(delay.Level(k)) == 1 {
			return delay.Level(k)
		}
	}
	return ""
}

// TestRetryAfterOnTheDelayQueues: a handler's own long wait (a 429's
// Retry-After of 17 minutes) waits on the delay queues, not in the process
// and not on a rung, arrives no earlier than due, and spends an attempt.
func TestRetryAfterOnTheDelayQueues(t *testing.T) {
	t.Parallel()
	h := &answers{acks: []ack.Ack{ack.RetryAfter(17*time.Minute, errors.New("429: retry after 1020 s")), ack.Accept()}}
	f := start(t, &acemq.Server{Retry: retry.Exponential(5, time.Second, time.Minute)}, map[string]acemq.Handler{"orders": h})
	f.publish("orders", "m", nil)
	f.eventually("the copy waits on a level", func() bool { return onLevel(f.broker) != "" })
	if got := onLevel(f.broker); got != delay.Level(12) { // 17 min = 8160 units: the highest bit is 2^12
		t.Errorf("waits on %s, want %s", got, delay.Level(12))
	}
	if n := f.broker.Depth("orders.retry.17m"); n != 0 {
		t.Error("a handler's wait went to a rung")
	}
	f.broker.Clock().Advance(17*time.Minute - time.Millisecond)
	if got := onLevel(f.broker); got != delay.Level(5) { // 8160 = 0b1111111100000: its last wait, 32 units, on level 5
		t.Fatalf("a millisecond before due it waits on %q, want %s", got, delay.Level(5))
	}
	if n := len(h.deliveries()); n != 1 {
		t.Fatalf("%d deliveries before due, want 1", n)
	}
	f.broker.Clock().Advance(time.Millisecond)
	f.eventually("the retry arrives", func() bool { return len(h.deliveries()) == 2 })
	if got := h.deliveries()[1]; got.Attempt != 2 || got.Snoozes != 0 {
		t.Errorf("retry envelope %+v, want attempt 2, no snooze", got)
	}
	f.counterReaches(acemq.MetricRetries, map[string]string{"where": "delays"}, 1)
}

// TestSnoozeSixHoursInMilliseconds: a six-hour snooze keeps the attempt,
// counts the snooze on the message, and on the virtual clock takes no
// real time at all.
func TestSnoozeSixHoursInMilliseconds(t *testing.T) {
	t.Parallel()
	h := &answers{acks: []ack.Ack{ack.Snooze(6 * time.Hour), ack.Snooze(6 * time.Hour), ack.Accept()}}
	f := start(t, &acemq.Server{Retry: retry.Fixed(2, time.Second)}, map[string]acemq.Handler{"orders": h})
	f.publish("orders", "m", nil)
	for i := 1; i <= 2; i++ {
		f.eventually("the snooze waits on a level", func() bool { return onLevel(f.broker) != "" })
		f.broker.Clock().Advance(6 * time.Hour)
		f.eventually("the snoozed message comes back", func() bool { return len(h.deliveries()) == i+1 })
	}
	for i, e := range h.deliveries() {
		if e.Attempt != 1 || e.Snoozes != i {
			t.Errorf("delivery %d: attempt %d snoozes %d, want 1 and %d", i+1, e.Attempt, e.Snoozes, i)
		}
	}
	f.counterReaches(acemq.MetricSnoozed, map[string]string{"where": "delays"}, 2)
	if n := f.counter(acemq.MetricRetries, nil); n != 0 {
		t.Errorf("a snooze counted as %d retries", n)
	}
}

// TestSnoozeLimit: a handler that always snoozes cannot keep a message
// for ever: past the policy's limit it is dead-lettered, saying why.
func TestSnoozeLimit(t *testing.T) {
	t.Parallel()
	h := &answers{acks: []ack.Ack{ack.Snooze(time.Second)}}
	f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Second).WithMaxSnoozes(2)}, map[string]acemq.Handler{"orders": h})
	f.publish("orders", "m", nil)
	for i := range 2 {
		f.advance(1, time.Second) // a short snooze waits in the process
		f.eventually("the snoozed message comes back", func() bool { return len(h.deliveries()) == i+2 })
	}
	d := f.only("orders.dlq")
	if r, _ := d.Headers[acemq.HeaderError].(string); !strings.HasPrefix(r, "snoozed 2 times, the retry policy's limit") {
		t.Errorf("reason %q", r)
	}
	// The dead letter is in the .dlq once confirmed; the metric is
	// recorded as the original is settled, a moment later.
	f.eventually("dead-lettered{snooze_limit} is counted", func() bool {
		return f.counter(acemq.MetricDeadLettered, map[string]string{"outcome": "snooze_limit"}) >= 1
	})
	f.counterReaches(acemq.MetricDeadLettered, map[string]string{"outcome": "snooze_limit"}, 1)
}

// TestRetriesOnTheDelayQueues: a policy that opts in spends its broker
// waits on the delay queues, jittered, and declares no rung.
func TestRetriesOnTheDelayQueues(t *testing.T) {
	t.Parallel()
	h := &answers{acks: []ack.Ack{ack.Retry(errors.New("down")), ack.Accept()}}
	pol := retry.Fixed(3, time.Hour).WithDelayQueues(true) // ±20% jitter by default
	f := start(t, &acemq.Server{Retry: pol}, map[string]acemq.Handler{"orders": h})
	if _, ok := f.broker.Queue(retry.RungName("orders", time.Hour)); ok {
		t.Error("a policy on the delay queues declared a rung")
	}
	f.publish("orders", "m", nil)
	f.eventually("the retry waits on a level", func() bool { return onLevel(f.broker) != "" })
	due, _ := transport.Int64(f.broker.Peek(onLevel(f.broker))[0].Headers[delay.DueHeader])
	wait := time.UnixMilli(due).Sub(f.broker.Clock().Now())
	if wait < 48*time.Minute || wait > 72*time.Minute+delay.Unit {
		t.Errorf("due in %v, want an hour ±20%%", wait)
	}
	f.broker.Clock().Advance(73 * time.Minute)
	f.eventually("the retry arrives", func() bool { return len(h.deliveries()) == 2 })
}

// TestDelayQueuesDeletedUnderTheServer: a wait whose level exchange is
// gone is held in the process instead, not lost and not looped, and the
// server declares the delay queues again.
func TestDelayQueuesDeletedUnderTheServer(t *testing.T) {
	t.Parallel()
	h := &answers{acks: []ack.Ack{ack.RetryAfter(time.Hour, errors.New("later")), ack.Accept()}}
	f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Second)}, map[string]acemq.Handler{"orders": h})
	route, _ := delay.RouteTo("orders", time.Hour)
	f.broker.DeleteExchange(route.Exchange)
	f.publish("orders", "m", nil)
	f.advance(1, time.Hour) // held in the process
	f.eventually("the retry arrives", func() bool { return len(h.deliveries()) == 2 })
	f.counterReaches(acemq.MetricRungMissing, map[string]string{"rung": route.Exchange}, 1)
	if _, ok := f.broker.Exchange(route.Exchange); !ok {
		t.Error("the server did not declare the delay queues again")
	}
}

// TestNoDeclareChecksTheDelayQueues: with declaration off, a policy that
// waits on the delay queues refuses to start without them, naming what is
// missing and the command that declares it; one that does not starts.
func TestNoDeclareChecksTheDelayQueues(t *testing.T) {
	t.Parallel()
	broker, conn := bare(t)
	if err := conn.Declare(context.Background(), acemq.Topology("orders", retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	srv := &acemq.Server{Transport: conn, Handler: acceptMux("orders"), NoDeclare: true,
		Retry: retry.Exponential(5, time.Minute, time.Hour).WithDelayQueues(true)}
	err := srv.Run(context.Background())
	if !errors.Is(err, acemq.ErrMissingTopology) || !strings.Contains(err.Error(), "acemq topology --delays") || !strings.Contains(err.Error(), delay.Prefix) {
		t.Errorf("Run = %v, want ErrMissingTopology naming the delay queues and the command", err)
	}
	if _, ok := broker.Queue(delay.Level(0)); ok {
		t.Error("declare off declared the delay queues")
	}

	// The queue's .dlq missing: named too.
	if err := conn.Declare(context.Background(), acemq.Topology("other", retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	broker.DeleteQueue("other.dlq")
	srv = &acemq.Server{Transport: conn, Handler: acceptMux("other"), NoDeclare: true}
	if err := srv.Run(context.Background()); !errors.Is(err, acemq.ErrMissingTopology) || !strings.Contains(err.Error(), "queue other.dlq does not exist") {
		t.Errorf("Run with other.dlq missing = %v", err)
	}
}

// TestDueWhileTheQueueIsGone: a scheduled message whose queue is deleted
// before it is due is not dropped: it waits in the undeliverable queue, and
// the server of that queue, once it has declared the queue again, sends it
// on and counts it. A message for a queue the server does not serve is
// left waiting for that queue's own server. (delay's and memory's tests
// hold Redeliver's count of what still waits.)
func TestDueWhileTheQueueIsGone(t *testing.T) {
	t.Parallel()
	broker := memory.New()
	conn := broker.Connect()
	defer conn.Close()
	ctx := context.Background()
	if err := conn.Declare(ctx, acemq.Topology("payroll", retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	h := &answers{acks: []ack.Ack{ack.Accept()}}
	srv := &acemq.Server{}
	acemq.SetRedeliverEvery(srv, 5*time.Millisecond)
	f := startOn(t, broker, srv, map[string]acemq.Handler{"invoices": h})
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
	for _, q := range []string{"invoices", "payroll"} { // payroll: not bound, not served
		if _, err := pub.Publish(ctx, acemq.Outgoing{RoutingKey: q, Body: []byte(q), Delay: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	// Due at once after the delete, before the server has declared
	// invoices again: both go to the undeliverable queue.
	f.broker.DeleteQueue("invoices")
	f.broker.Clock().Advance(time.Minute)
	f.eventually("it arrives once the server declared its queue again", func() bool { return len(h.deliveries()) == 1 })
	f.eventually("the arrival is counted", func() bool {
		return f.counter(acemq.MetricDelayRedeliver, map[string]string{"result": "arrived"}) == 1
	})
	if h.deliveries()[0].ID == "" {
		t.Error("arrived without its id")
	}
	if got := f.broker.Depth("payroll"); got != 0 {
		t.Errorf("the server delivered %d messages to payroll, a queue it does not serve", got)
	}
	if n := f.broker.Depth(delay.Undeliverable); n != 1 {
		t.Errorf("%d undeliverable, want payroll's 1 still waiting", n)
	}
}
