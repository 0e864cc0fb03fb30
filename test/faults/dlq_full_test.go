package faults_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
)

// TestFaultDeadLetterQueueFull: someone else declared Q.dlq
// with x-max-length 5 and x-overflow reject-publish, so once it holds five
// the broker nacks every dead letter. Such a .dlq cannot be declared by the
// server as well (its declaration has no arguments: a 406), so the server
// runs with declare off on the topology applied by hand, .dlq arguments and
// all. Each refused copy's original is held unacknowledged (counted on
// acemq.messages.held and acemq.messages.set.aside.failed{why=nacked}),
// every prefetch slot fills with them and the consumer stops taking more:
// slowed, nothing lost. Then the operator drains the .dlq, and every held
// copy, and every one after it, is placed there.
//
// (A RabbitMQ policy giving the .dlq max-length and overflow is the other
// way to cap it, and leaves declare on: a policy changes no declaration.)
func TestFaultDeadLetterQueueFull(t *testing.T) {
	t.Parallel()
	const name = "dlq-full"
	const capacity, prefetch = 5, 4
	url, vh := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log := testLogger(t)
	q := "faults." + name
	dlq := acemq.DeadLetterQueue(q)
	pol := testPolicy()
	admin := dial(t, url, log)
	top := acemq.Topology(q, pol, nil)
	for i := range top.Queues {
		if top.Queues[i].Name == dlq {
			top.Queues[i].Args = map[string]any{"x-max-length": int32(capacity), "x-overflow": "reject-publish"}
		}
	}
	if err := admin.Declare(context.Background(), top); err != nil {
		t.Fatal(err)
	}
	// Four in five are dead-lettered by the handler at once.
	js := make([]job, 50)
	for i := range js {
		js[i] = job{ID: fmt.Sprintf("%s-%04d", name, i), Reject: i%5 != 0}
	}
	m := newMetrics()
	l := newLedger()
	tr := dial(t, url, log)
	run := serve(t, tr, q, &acemq.Server{Retry: pol, NoDeclare: true, Concurrency: 2, Prefetch: prefetch,
		MeterProvider: m.provider}, l.handler(0), log)
	stats := &publishStats{}
	sent := publishAll(t, admin, q, js, 2, 0, stats)

	refusal := map[string]string{"queue": q, "destination": dlq, "why": "nacked"}
	polltest.Within(t, 30*time.Second, "every prefetch slot holds an original whose dead letter the full .dlq refused", func() bool {
		return m.counter(t, acemq.MetricHeld, refusal) == prefetch
	})
	if got := depth(url, dlq); got != capacity {
		t.Errorf("%s holds %d messages, want its x-max-length of %d", dlq, got, capacity)
	}
	// The broker's own count: they are unacknowledged in Q.
	unacked := -1
	for _, line := range strings.Split(brokertest.Ctl(t, "", "list_queues", "-p", vh, "name", "messages_unacknowledged"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == q {
			unacked, _ = strconv.Atoi(f[1])
		}
	}
	if unacked != prefetch {
		t.Errorf("the broker counts %d messages unacknowledged in %s, want the %d held", unacked, q, prefetch)
	}
	calls := l.totalCalls()
	time.Sleep(time.Second)
	if got := l.totalCalls(); got != calls {
		t.Errorf("the handler ran %d times in 1s with every prefetch slot held", got-calls)
	}
	refused := m.counter(t, acemq.MetricSetAsideFailed, refusal)
	if refused < prefetch {
		t.Errorf("%s{why=nacked} = %d, want at least the %d held", acemq.MetricSetAsideFailed, refused, prefetch)
	}
	waiting := depth(url, q)
	t.Logf("%s: .dlq full at %d; %d originals held (the broker counts %d unacknowledged), %d refusals counted, %d messages waiting in %s",
		name, capacity, m.counter(t, acemq.MetricHeld, refusal), unacked, refused, waiting, q)
	if waiting == 0 {
		t.Errorf("nothing waits in %s: the consumer did not slow", q)
	}

	// The operator drains the .dlq as it fills.
	sk := newSink(url, q)
	began := time.Now()
	if !polltest.Until(45*time.Second, sk.settled(l, sent)) {
		t.Errorf("%s: not settled within 45s of the operator draining the .dlq", name)
	}
	t.Logf("%s: settled %s after the operator began to drain; %d refusals in all; producer: %s",
		name, time.Since(began).Round(time.Millisecond), m.counter(t, acemq.MetricSetAsideFailed, refusal), stats)
	polltest.Within(t, 30*time.Second, "no original is held", func() bool { return m.counter(t, acemq.MetricHeld, nil) == 0 })
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	sk.collect(t, name, sent, l.acceptedCopy(), pol).report(t)
}
