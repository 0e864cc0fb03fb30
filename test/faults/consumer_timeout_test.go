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
)

// TestFaultConsumerTimeout is issue 15's item 4: handlers that ignore
// their context and outlive the broker's consumer_timeout (1 s here, on
// the private node), among normal ones. The server's HandlerTimeout
// (500 ms) cancels their context and remembers them; the broker closes the
// channel (406, in the transport's log) and delivers them again; the
// server dead-letters each, naming the timeout, instead of running it
// again at attempt 1 forever (before the fix). Normal messages are
// handled; nothing lost.
//
// A slow message runs once or twice, and at most three times. Twice when
// the broker closes the channel for another slow message less than
// HandlerTimeout into its run: it comes back before the server counts it
// overdue and runs again beside the first run, and that second run is
// overdue in turn. A third run would need the second cut short the same
// way; the slow messages come half a second apart, so it could.
func TestFaultConsumerTimeout(t *testing.T) {
	n := node.Get(t)
	n.Acquire(t)
	url, _ := n.FreshVhost(t)
	// RabbitMQ 3.10.8 reads both when a channel opens: set before dialling.
	setRabbitEnv(t, n, "consumer_timeout", "1000")
	setRabbitEnv(t, n, "channel_tick_interval", "100")
	const name = "consumer-timeout"
	log, logs := observedLogger(t)
	q := "faults." + name
	pol := testPolicy()
	m := newMetrics()
	l := newLedger()
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	normal := l.handler(time.Millisecond)
	h := acemq.HandlerFunc(func(ctx context.Context, msg *acemq.Message) ack.Ack {
		if !strings.HasSuffix(msg.ID(), "-slow") {
			return normal.ServeMessage(ctx, msg)
		}
		l.mu.Lock()
		l.calls[msg.ID()]++
		l.mu.Unlock()
		select { // deaf to ctx, on purpose
		case <-time.After(3 * time.Second):
		case <-release:
		}
		return ack.Accept()
	})
	tr := dial(t, url, log)
	run := serve(t, tr, q, &acemq.Server{Retry: pol, HandlerTimeout: 500 * time.Millisecond, Concurrency: 8,
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
	if !until(60*time.Second, sh.settled(l, sent)) {
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
		if runs < 1 || runs > 3 {
			t.Errorf("%s ran %d times, want 1 to 3", s.ID, runs)
		}
	}
	l.mu.Unlock()
	for _, s := range slow {
		d, where, ok := sh.find(s.ID)
		if !ok || where != endDLQ || !strings.Contains(reasonOf(d), "ran past its timeout") {
			t.Errorf("%s: found %v in %q with reason %q, want a dead letter naming the timeout", s.ID, ok, where, reasonOf(d))
		}
	}
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
	t.Logf("%s: the broker closed the consumer's channel %d times for its consumer_timeout; its connection was lost %d times",
		name, closed, connectionsLost(logs, " consume "+q))
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
