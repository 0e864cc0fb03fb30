package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
)

// TestFaultSetAsideQueuesDeleted: while messages flow, an operator deletes
// a rung, then Q.dlq, then Q.parked. Unlike TestFaultQueuesDeleted, Q has
// no dead-letter route of its own, so nothing can take a refused copy's
// original off the server's hands: with declare on, the server declares
// each queue again itself (a rung copy that reached no queue counted on
// acemq.retry.rung.missing, a dead letter or park on
// acemq.messages.set.aside.failed{why=missing}) and places the copy. With
// declare off (a second queue, its topology applied by the operator), the
// dead letters of a deleted .dlq are held unacknowledged, and placed once
// the operator declares it again. Nothing is lost.
//
// The flow never stops, but each queue is deleted while no copy is on its
// way to it, and only then are the messages that need it published.
// RabbitMQ confirms a publish whose queue is deleted before the publish
// reaches it (rabbit_channel: "Deleted queue is a special case. Do not nack
// the rejected messages"), so a copy in flight to a queue being deleted is
// lost with a positive confirm, which no client can tell from a placed one:
// the operator's loss. A first version of this scenario, deleting while
// dead letters flowed, lost one so.
func TestFaultSetAsideQueuesDeleted(t *testing.T) {
	t.Parallel()
	const name = "set-aside-deleted"
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log := testLogger(t)
	m := newMetrics()
	pubTr := dial(t, url, log)
	stats := &publishStats{}

	// Declare on: the server puts back what was deleted.
	q := "faults." + name
	pol := testPolicy()
	rung := retry.RungName(q, pol.BrokerRungs()[0])
	l := newLedger()
	run := serve(t, dial(t, url, log), q, &acemq.Server{Retry: pol, MeterProvider: m.provider}, l.handler(time.Millisecond), log)
	sk := newSink(url, q)
	// The flow: messages accepted at once or after a wait in the process,
	// which need none of the queues deleted, until the last step is done.
	quit, flowed := make(chan struct{}), make(chan []job, 1)
	go func() {
		var sent []job
		for b := 0; ; b++ {
			select {
			case <-quit:
				flowed <- sent
				return
			default:
			}
			part := make([]job, 20)
			for i := range part {
				part[i] = job{ID: fmt.Sprintf("%s-flow-%03d-%02d", name, b, i)}
				if i%5 == 0 {
					part[i].FailUntil = 2
				}
			}
			sent = append(sent, publishAll(t, pubTr, q, part, 1, 10*time.Millisecond, stats)...)
		}
	}()
	var stopFlow sync.Once
	flow := func() (sent []job) {
		stopFlow.Do(func() { close(quit); sent = <-flowed })
		return sent
	}
	t.Cleanup(func() { flow() })
	polltest.Within(t, 30*time.Second, "the handler is busy", func() bool { return l.totalCalls() >= 20 })
	var sent []job
	for i, step := range []struct {
		queue, metric string
		attrs         map[string]string
		script        job // of the messages that need the queue
	}{
		{rung, acemq.MetricRungMissing, map[string]string{"queue": q, "rung": rung}, job{FailUntil: 3}},
		{acemq.DeadLetterQueue(q), acemq.MetricSetAsideFailed,
			map[string]string{"queue": q, "destination": acemq.DeadLetterQueue(q), "why": "missing"}, job{Reject: true}},
		{acemq.ParkedQueue(q), acemq.MetricSetAsideFailed,
			map[string]string{"queue": q, "destination": acemq.ParkedQueue(q), "why": "missing"}, job{Park: true}},
	} {
		deleteEmpty(t, url, step.queue)
		at := l.totalCalls()
		part := make([]job, 10)
		for k := range part {
			part[k] = step.script
			part[k].ID = fmt.Sprintf("%s-step%d-%02d", name, i+1, k)
		}
		sent = append(sent, publishAll(t, pubTr, q, part, 2, 5*time.Millisecond, stats)...)
		if !polltest.Until(30*time.Second, sk.settled(l, sent)) {
			t.Fatalf("%s: the messages that need %s not settled within 30s of its deletion", name, step.queue)
		}
		if got := m.counter(t, step.metric, step.attrs); got == 0 {
			t.Errorf("%s = 0 for %s, deleted", step.metric, step.queue)
		}
		if depth(url, step.queue) < 0 {
			t.Errorf("%s was not declared again", step.queue)
		}
		t.Logf("%s: %s deleted at %d handler calls and declared again by the server; %s = %d for it",
			name, step.queue, at, step.metric, m.counter(t, step.metric, step.attrs))
	}
	sent = append(sent, flow()...)
	if !polltest.Until(60*time.Second, sk.settled(l, sent)) {
		t.Errorf("%s: not settled within 60s", name)
	}
	if got := m.counter(t, acemq.MetricHeld, map[string]string{"queue": q}); got != 0 {
		t.Errorf("%d originals still held once settled", got)
	}
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	t.Logf("%s: producer: %s", name, stats)
	tl := sk.collect(t, name, sent, l.acceptedCopy(), pol)

	// Declare off: the dead letters wait, held, for the operator.
	qo := q + ".no-declare"
	dlq := acemq.DeadLetterQueue(qo)
	polo := pol.WithBrokerWaitThreshold(0)
	if err := pubTr.Declare(context.Background(), acemq.Topology(qo, polo, nil)); err != nil {
		t.Fatal(err)
	}
	lo := newLedger()
	runo := serve(t, dial(t, url, log), qo, &acemq.Server{Retry: polo, NoDeclare: true, MeterProvider: m.provider},
		lo.handler(time.Millisecond), log)
	deleteEmpty(t, url, dlq)
	jso := jobs(name+"-no-declare", 100)
	sento := publishAll(t, pubTr, qo, jso, 2, 5*time.Millisecond, stats)
	sko := newSink(url, qo)
	held := map[string]string{"queue": qo, "destination": dlq, "why": "missing"}
	want := int64(expected(sento)[endDLQ])
	polltest.Within(t, 30*time.Second, "the others settle and every dead letter is held", func() bool {
		sko.poll()
		return lo.allAccepted(sento) && len(sko.parked) == expected(sento)[endParked] &&
			m.counter(t, acemq.MetricHeld, held) == want
	})
	time.Sleep(time.Second) // more than the first try's wait: no one declares it
	if got := depth(url, dlq); got != -1 {
		t.Errorf("%s exists again (%d messages) though only the operator may declare it", dlq, got)
	}
	if got := m.counter(t, acemq.MetricSetAsideFailed, held); got != want {
		t.Errorf("%s{why=missing} = %d, want the %d dead letters", acemq.MetricSetAsideFailed, got, want)
	}
	t.Logf("%s: declare off: %d dead letters held for the missing %s", name, want, dlq)
	if err := pubTr.Declare(context.Background(), acemq.Topology(qo, polo, nil)); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if !polltest.Until(45*time.Second, sko.settled(lo, sento)) {
		t.Errorf("%s: not settled within 45s of the operator declaring %s again", name, dlq)
	}
	polltest.Within(t, 30*time.Second, "no original is held", func() bool { return m.counter(t, acemq.MetricHeld, held) == 0 })
	t.Logf("%s: declare off: the held dead letters placed %s after the operator declared %s",
		name, time.Since(began).Round(time.Millisecond), dlq)
	if err := runo.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	tl.merge(sko.collect(t, name, sento, lo.acceptedCopy(), polo))
	tl.report(t)
}
