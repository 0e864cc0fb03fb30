package faults_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
)

// TestFaultConsumerTimeout is issue 23's item 4 (and issue 15's before
// it): handlers that ignore their context and outlive the broker's
// consumer_timeout (1 s here, on the private node, checked every 100 ms),
// among normal ones, with the DEFAULT HandlerTimeout (25 minutes, far
// above the broker's: as in production, where brokers are set at 5 to 15
// minutes). Before, such a message ran again and again, never
// dead-lettered. Now the broker's close (406, "Timeout value used: 1000
// ms") is reported to the server, which marks the handler overdue and
// dead-letters its redelivery with consumer_timeout, caps the queue's
// handlers at 500 ms from then on (logged once), and never runs a
// redelivery beside its message's handler still running. Each slow
// message is handled at most twice (once in practice: twice only if its
// handler began a few milliseconds after the broker's clock started and
// had not quite run the timeout when the channel closed, and returned
// before its redelivery came), and no redelivery runs beside its
// message's handler. The normal messages end where their scripts send
// them; nothing is lost.
//
// The second case sets HandlerTimeout at 500 ms by hand, as users had to:
// the same ends.
func TestFaultConsumerTimeout(t *testing.T) {
	n := node.Get(t)
	n.Acquire(t)
	// RabbitMQ 3.10.8 reads both when a channel opens: set before dialling.
	setRabbitEnv(t, n, "consumer_timeout", "1000")
	setRabbitEnv(t, n, "channel_tick_interval", "100")
	for _, tc := range []struct {
		name           string
		handlerTimeout time.Duration
	}{
		{"consumer-timeout", 0},
		{"consumer-timeout-handler-timeout", 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) { consumerTimeoutScenario(t, n, tc.name, tc.handlerTimeout) })
	}
}

// consumerTimeoutScenario runs one case of TestFaultConsumerTimeout on
// the private node n, its consumer_timeout set.
func consumerTimeoutScenario(t *testing.T, n *brokertest.Node, name string, handlerTimeout time.Duration) {
	url, _ := n.FreshVhost(t)
	log, logs := observedLogger(t)
	q := "faults." + name
	pol := testPolicy()
	m := newMetrics()
	l := newLedger()
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	normal := l.handler(time.Millisecond)
	var (
		mu      sync.Mutex
		running = map[string]int{}
		twice   []string // redeliveries that began beside a handler of their message
		chains  []string // other overlaps: two copies of one id (see below)
	)
	h := acemq.HandlerFunc(func(ctx context.Context, msg *acemq.Message) ack.Ack {
		id := msg.ID()
		mu.Lock()
		if running[id]++; running[id] > 1 {
			if msg.Envelope().Redelivered {
				twice = append(twice, id)
			} else {
				chains = append(chains, fmt.Sprintf("%s attempt %d", id, msg.Attempt()))
			}
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			running[id]--
			mu.Unlock()
		}()
		if !strings.HasSuffix(id, "-slow") {
			return normal.ServeMessage(ctx, msg)
		}
		l.mu.Lock()
		l.calls[id]++
		l.mu.Unlock()
		select { // deaf to ctx, on purpose
		case <-time.After(3 * time.Second):
		case <-release:
		}
		return ack.Accept()
	})
	tr := dial(t, url, log)
	run := serve(t, tr, q, &acemq.Server{Retry: pol, HandlerTimeout: handlerTimeout, Concurrency: 8,
		MeterProvider: m.provider}, h, log)
	t.Cleanup(free) // before serve's stop: a sleeping handler would hold it up

	// The slow ones end in the .dlq: the handler never reads their body.
	var js, slow []job
	for i, j := range jobs(name, 200) {
		if i%50 == 25 {
			s := job{ID: fmt.Sprintf("%s-%04d-slow", name, i), Reject: true}
			slow = append(slow, s)
			js = append(js, s)
		}
		js = append(js, j)
	}
	stats := &publishStats{}
	sent := publishAll(t, tr, q, js, 2, 20*time.Millisecond, stats)
	sh := newShelf(url, q)
	if !polltest.Until(60*time.Second, sh.settled(l, sent)) {
		t.Errorf("%s: not settled within 60s", name)
	}
	free()
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	t.Logf("%s: producer: %s", name, stats)

	l.mu.Lock()
	for _, s := range slow {
		runs := l.calls[s.ID]
		t.Logf("%s ran %d times", s.ID, runs)
		if runs < 1 || runs > 2 {
			t.Errorf("%s ran %d times, want once or twice", s.ID, runs)
		}
	}
	l.mu.Unlock()
	mu.Lock()
	if len(twice) > 0 {
		t.Errorf("%d redeliveries ran beside a handler of their message still running: %v", len(twice), head(twice))
	}
	// A retry waiting in the process when the channel closed publishes its
	// copy and then finds its ack refused: the broker redelivers the
	// original too, and the two chains of copies (new messages, not
	// redeliveries) can run side by side. Counted, not promised against.
	t.Logf("%s: %d copies of one id ran beside another chain's (a retry held in the process across the close): %v", name, len(chains), head(chains))
	mu.Unlock()
	for _, s := range slow {
		d, where, ok := sh.find(s.ID)
		if !ok || where != endDLQ || !strings.Contains(reasonOf(d), "ran past its timeout") {
			t.Errorf("%s: found %v in %q with reason %q, want a dead letter naming the timeout", s.ID, ok, where, reasonOf(d))
		}
	}
	sh.mu.Lock()
	for _, d := range sh.dlq { // the normal ones are not harmed: none dead-lettered as overdue
		if id := deliveryID(d); !strings.HasSuffix(id, "-slow") && strings.Contains(reasonOf(d), "ran past its timeout") {
			t.Errorf("normal message %s dead-lettered as overdue: %q", id, reasonOf(d))
		}
	}
	sh.mu.Unlock()
	if got := m.counter(t, acemq.MetricDeadLettered, map[string]string{"outcome": "consumer_timeout"}); got != int64(len(slow)) {
		t.Errorf("%s{outcome=consumer_timeout} = %d, want %d", acemq.MetricDeadLettered, got, len(slow))
	}
	closed := 0
	for _, e := range logs.FilterMessage("acemq: consumer channel lost; resubscribing, its unsettled deliveries are stale").All() {
		f := e.ContextMap()
		if reason, _ := f["reason"].(string); f["code"] == int64(406) && strings.Contains(reason, "delivery acknowledgement on channel") && strings.Contains(reason, "timed out") {
			closed++
		}
	}
	if closed == 0 {
		t.Error("the transport's log shows no channel closed by the broker's consumer_timeout (406)")
	}
	learnt := logs.FilterMessageSnippet("the broker's consumer timeout for this queue").All()
	if len(learnt) != 1 {
		t.Errorf("%d logs of the learnt consumer timeout, want 1 (once per queue)", len(learnt))
	} else if f := learnt[0].ContextMap(); f["consumer_timeout"] != "1s" {
		t.Errorf("the learnt consumer timeout is %v, want the broker's 1s", f["consumer_timeout"])
	} else if handlerTimeout == 0 && f["cap"] != "500ms" {
		t.Errorf("the cap logged is %v, want 500ms", f["cap"])
	}
	t.Logf("%s: the broker closed the consumer's channel %d times for its consumer_timeout; its connection was lost %d times; %d redeliveries waited for their message's handler",
		name, closed, connectionsLost(logs, " consume "+q), logs.FilterMessageSnippet("it waits for that handler rather than run beside it").Len())
	sh.collect(t, name, sent, l.acceptedCopy(), pol).report(t)
}

// setRabbitEnv sets the rabbit application's key on the private node n to
// value (an Erlang term) until the test ends, then puts the node's own back.
func setRabbitEnv(t *testing.T, n *brokertest.Node, key, value string) {
	t.Helper()
	set := func(v string) { n.Ctl(t, "eval", fmt.Sprintf("application:set_env(rabbit, %s, %s).", key, v)) }
	was := strings.TrimSpace(n.Ctl(t, "eval", fmt.Sprintf("application:get_env(rabbit, %s).", key)))
	old, ok := strings.CutPrefix(strings.TrimSuffix(was, "}"), "{ok,")
	if !ok {
		t.Fatalf("%s on %s: %q", key, n.Name, was)
	}
	t.Cleanup(func() { set(old) })
	set(value)
}
