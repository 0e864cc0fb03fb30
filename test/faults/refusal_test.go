package faults_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// TestFaultPreconditionFailed is scenario 6: someone else declared queue A
// with other arguments, so the server's declaration of A is refused (406).
// That refusal kills only its own channel: a server of queue B on the same
// transport keeps consuming, retrying and dead-lettering, and the producer
// keeps publishing to both. A's messages wait in A until a server declares
// it as it is, and then are handled: nothing lost.
func TestFaultPreconditionFailed(t *testing.T) {
	t.Parallel()
	const name = "precondition-failed"
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log := testLogger(t)
	qa, qb := "faults."+name+".a", "faults."+name+".b"
	theirs := map[string]any{"x-max-priority": int32(5)}
	if err := raw(url, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(qa, true, false, false, false, amqp.Table(theirs))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	pol := testPolicy()
	tr := dial(t, url, log)
	pubTr := dial(t, url, log)
	la, lb := newLedger(), newLedger()
	runB := serve(t, tr, qb, &acemq.Server{Retry: pol}, lb.handler(2*time.Millisecond), log)

	jsA, jsB := jobs(name+"-a", 200), jobs(name+"-b", 200)
	stats := &publishStats{}
	sentA, sentB := make(chan []job, 1), make(chan []job, 1)
	go func() { sentA <- publishAll(t, pubTr, qa, jsA, 2, 10*time.Millisecond, stats) }()
	go func() { sentB <- publishAll(t, pubTr, qb, jsB, 2, 10*time.Millisecond, stats) }()
	polltest.Within(t, 60*time.Second, "B's server is busy", func() bool { return lb.totalCalls() > 20 })

	// Our server of A, declaring A as it would have it: refused.
	mux := acemq.NewMux()
	mux.Handle(qa, la.handler(0))
	err := (&acemq.Server{Transport: tr, Handler: mux, Retry: pol, Logger: log}).Run(context.Background())
	switch {
	case !errors.Is(err, transport.ErrPreconditionFailed):
		t.Errorf("Run of a server whose queue was declared otherwise = %v, want ErrPreconditionFailed", err)
	case !strings.Contains(err.Error(), qa):
		t.Errorf("the error does not name the queue %s: %v", qa, err)
	}
	t.Logf("server of A: %v", err)
	// A second server of B on the same transport, with arguments of its
	// own: refused too, and the running one is not disturbed.
	mux = acemq.NewMux()
	mux.Handle(qb, lb.handler(0))
	err = (&acemq.Server{Transport: tr, Handler: mux, Logger: log,
		Queues: map[string]acemq.QueueConfig{qb: {Args: map[string]any{"x-queue-type": "quorum"}}}}).Run(context.Background())
	if !errors.Is(err, transport.ErrPreconditionFailed) {
		t.Errorf("Run of a second server of B with other arguments = %v, want ErrPreconditionFailed", err)
	}
	// Someone else, on a connection of their own, tries the same.
	if err := raw(url, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(qb, true, false, false, false, amqp.Table{"x-max-length": int32(10)})
		return err
	}); err == nil {
		t.Error("an inequivalent redeclare of B was accepted")
	}

	sentBJobs := <-sentB
	sk := newSink(url, qb)
	if !polltest.Until(60*time.Second, sk.settled(lb, sentBJobs)) {
		t.Errorf("%s: B not settled within 60s", name)
	}
	sentAJobs := <-sentA
	t.Logf("%s: producer: %s", name, stats)
	if stats.failures != 0 {
		t.Errorf("the producer was disturbed by the refusals: %s", stats)
	}
	if la.totalCalls() != 0 {
		t.Errorf("A's handler ran %d times though its server never started", la.totalCalls())
	}
	if got := depth(url, qa); got != len(sentAJobs) {
		t.Errorf("A holds %d messages, want the %d published", got, len(sentAJobs))
	}
	if err := runB.stop(t); err != nil {
		t.Errorf("Run of B: %v", err)
	}

	// The fix: declare A as it is.
	runA := serve(t, tr, qa, &acemq.Server{Retry: pol, Queues: map[string]acemq.QueueConfig{qa: {Args: theirs}}}, la.handler(0), log)
	ska := newSink(url, qa)
	if !polltest.Until(60*time.Second, ska.settled(la, sentAJobs)) {
		t.Errorf("%s: A not settled within 60s", name)
	}
	if err := runA.stop(t); err != nil {
		t.Errorf("Run of A: %v", err)
	}
	tl := sk.collect(t, name, sentBJobs, lb.acceptedCopy(), pol)
	tl.merge(ska.collect(t, name, sentAJobs, la.acceptedCopy(), pol))
	tl.report(t)
}

// TestFaultQueuesDeleted is scenario 7: under a running server, a rung
// queue is deleted (retries fall back to waiting in the process, counted on
// acemq.retry.rung.missing), then the .dlq (dead letters are refused, the
// original is rejected to the broker and the queue's own dead-letter
// exchange takes it to a graveyard, counted on
// acemq.messages.set.aside.failed). Nothing is lost.
func TestFaultQueuesDeleted(t *testing.T) {
	t.Parallel()
	const name = "queues-deleted"
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log := testLogger(t)
	q := "faults." + name
	graveyard := q + ".graveyard"
	if err := raw(url, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(graveyard, true, false, false, false, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	pol := testPolicy()
	rung := retry.RungName(q, pol.BrokerRungs()[0])
	m := newMetrics()
	l := newLedger()
	tr := dial(t, url, log)
	pubTr := dial(t, url, log)
	args := map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": graveyard}
	run := serve(t, tr, q, &acemq.Server{Retry: pol, MeterProvider: m.provider,
		Queues: map[string]acemq.QueueConfig{q: {Args: args}}}, l.handler(time.Millisecond), log)
	sk := newSink(url, q)
	sk.graveyard = graveyard
	js := jobs(name, 300)
	stats := &publishStats{}
	var sent []job
	phase := func(what string, part []job) {
		t.Helper()
		sent = append(sent, publishAll(t, pubTr, q, part, 2, 5*time.Millisecond, stats)...)
		if !polltest.Until(60*time.Second, sk.settled(l, sent)) {
			t.Fatalf("%s: not settled within 60s %s", name, what)
		}
	}
	phase("with every queue", js[:100])

	deleteEmpty(t, url, rung)
	phase("without the rung "+rung, js[100:200])
	if got := m.counter(t, acemq.MetricRungMissing, map[string]string{"rung": rung}); got == 0 {
		t.Errorf("%s = 0 after retries with %s deleted", acemq.MetricRungMissing, rung)
	} else {
		t.Logf("%s{rung=%s} = %d", acemq.MetricRungMissing, rung, got)
	}

	sk.poll() // what the .dlq holds is accounted for before it goes
	deleteEmpty(t, url, acemq.DeadLetterQueue(q))
	before := len(sk.dlq)
	phase("without the .dlq", js[200:])
	refused := len(sk.dlq) - before
	if got := m.counter(t, acemq.MetricSetAsideFailed, map[string]string{"queue": q}); got != int64(refused) {
		t.Errorf("%s = %d, want the %d messages the graveyard took", acemq.MetricSetAsideFailed, got, refused)
	}
	if expected(js[200:])[endDLQ] == 0 || refused == 0 {
		t.Errorf("no dead letter went to the graveyard (%d expected)", expected(js[200:])[endDLQ])
	}
	t.Logf("%s: producer: %s; %d dead letters refused and taken by the graveyard", name, stats, refused)
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	sk.collect(t, name, sent, l.acceptedCopy(), pol).report(t)
}

// deleteEmpty deletes queue once it is empty (if-empty), as an operator
// tidying up would: deleting messages is the operator's loss, not ours.
func deleteEmpty(t *testing.T, url, queue string) {
	t.Helper()
	var last error
	if !polltest.Until(90*time.Second, func() bool {
		last = raw(url, func(ch *amqp.Channel) error {
			_, err := ch.QueueDelete(queue, false, true, false)
			return err
		})
		return last == nil
	}) {
		t.Fatalf("delete %s: %v", queue, last)
	}
}

// TestFaultLeastPrivilege is scenario 8: a user without configure
// permission. With declare off (and every wait in the process) it consumes,
// retries and dead-letters into queues an administrator declared; with
// declare on its server fails at start, saying so.
func TestFaultLeastPrivilege(t *testing.T) {
	t.Parallel()
	const name = "least-privilege"
	adminURL, vh := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log := testLogger(t)
	q := "faults." + name
	pol := retry.Fixed(3, 50*time.Millisecond).WithBrokerWaitThreshold(0)
	admin := dial(t, adminURL, log)
	if err := admin.Declare(context.Background(), acemq.Topology(q, pol, nil)); err != nil {
		t.Fatal(err)
	}
	user := brokertest.RandomName("acemq-faults-")
	password := brokertest.AddUser(t, "", vh, user, "^$", ".*", ".*")
	url := brokertest.WithUser(adminURL, user, password)

	tr := dial(t, url, log)
	mux := acemq.NewMux()
	mux.Handle(q, newLedger().handler(0))
	err := (&acemq.Server{Transport: tr, Handler: mux, Retry: pol, Logger: log}).Run(context.Background())
	switch {
	case !errors.Is(err, transport.ErrAccessRefused):
		t.Errorf("Run with declare on, without configure permission = %v, want ErrAccessRefused", err)
	case !strings.Contains(err.Error(), q) || !strings.Contains(err.Error(), "declare"):
		t.Errorf("the error does not say what was refused: %v", err)
	}
	t.Logf("declare on: %v", err)

	l := newLedger()
	run := serve(t, tr, q, &acemq.Server{Retry: pol, NoDeclare: true}, l.handler(time.Millisecond), log)
	stats := &publishStats{}
	sent := publishAll(t, tr, q, jobs(name, 300), 2, 2*time.Millisecond, stats)
	sk := newSink(adminURL, q)
	if !polltest.Until(60*time.Second, sk.settled(l, sent)) {
		t.Errorf("%s: not settled within 60s", name)
	}
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	t.Logf("%s: producer: %s", name, stats)
	sk.collect(t, name, sent, l.acceptedCopy(), pol).report(t)
}
