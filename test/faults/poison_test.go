package faults_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// TestFaultPoisonHeaders is issue 15's item 2: a foreign client puts at the
// head of queue A a message whose headers nest 40 deep, which RabbitMQ
// takes and amqp091-go refuses to read, closing the whole connection. One
// Server serves A and B on one Transport, a connection per consumer: B's
// steady stream is handled once each, as if A were fine (before the fix,
// 138 to 190 times each in 8 s), while A's consumer reconnects ever more
// slowly and the rest of A waits behind the poison. Then the operator
// gives A a delivery limit, the way out the library's log line names for a
// quorum queue: the broker dead-letters the poison into A.dlq (x-death
// delivery_limit), and the rest of A is handled. Nothing lost.
//
// Only the poison: the first connection that died on it had been sent the
// prefetch, the poison and up to 31 messages behind it, and the broker
// counted a delivery for each; every consumer after it starts on
// probation (one delivery at a time while they are redelivered, see
// docs/internals.md), so every later connection died with the poison
// alone, and those behind it spent nothing more. Before the probation the
// limit dead-lettered the 31 with the poison (their x-death said
// delivery_limit too); the test pins that none is dead-lettered now.
func TestFaultPoisonHeaders(t *testing.T) {
	t.Parallel()
	const name = "poison-headers"
	url, vh := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log, logs := observedLogger(t)
	qa, qb := "faults."+name+".a", "faults."+name+".b"
	pol := testPolicy()
	// Quorum, so that a delivery limit can be put on it, and dead-lettering
	// into A.dlq (the Topology binds A.dlq to acemq.dlx with key A).
	argsA := map[string]any{"x-queue-type": "quorum",
		"x-dead-letter-exchange": retry.DeadLetterExchange, "x-dead-letter-routing-key": qa}
	// Reconnect waits up to 2 s: the suite's 1 s cap, jittered down to
	// half, would let even a backed-off consumer reconnect twice a second.
	tr := dial(t, url, log, rabbitmq.WithBackoff(50*time.Millisecond, 2*time.Second))
	pubTr := dial(t, url, log)
	la, lb := newLedger(), newLedger()
	mux := acemq.NewMux()
	mux.Handle(qa, la.handler(time.Millisecond))
	mux.Handle(qb, lb.handler(time.Millisecond))
	const prefetch = 32
	run := serve(t, tr, qa, &acemq.Server{Handler: mux, Retry: pol, Prefetch: prefetch,
		Queues: map[string]acemq.QueueConfig{qa: {Args: argsA}}}, nil, log)
	polltest.Within(t, 60*time.Second, "the server consumes "+qb, func() bool {
		info, err := tr.Inspect(context.Background(), qb)
		return err == nil && info.Consumers > 0
	})

	stats := &publishStats{}
	before := publishAll(t, pubTr, qa, acceptedJobs(name+"-a", 50), 2, 0, stats)
	polltest.Within(t, 60*time.Second, "A's first messages are handled", func() bool { return la.allAccepted(before) })
	poison := job{ID: name + "-a-poison", Reject: true} // the broker dead-letters it
	if err := raw(url, func(ch *amqp.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", qa, true, false, amqp.Publishing{
			Headers:       amqp.Table{acemq.HeaderID: poison.ID, "x-nested": nestedHeaders(40)},
			CorrelationId: poison.ID, DeliveryMode: amqp.Persistent, ContentType: "application/json", Body: body(poison),
		})
		if err != nil {
			return err
		}
		if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
			return fmt.Errorf("not confirmed: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatalf("publish the poison: %v", err)
	}
	start := time.Now()
	sentB := make(chan []job, 1)
	go func() { sentB <- publishAll(t, pubTr, qb, acceptedJobs(name+"-b", 300), 2, 60*time.Millisecond, stats) }()
	// One producer, so that A holds them in this order.
	behind := publishAll(t, pubTr, qa, acceptedJobs(name+"-a-behind", 100), 1, 0, stats)
	jsB := <-sentB
	skB := newSink(url, qb)
	if !polltest.Until(90*time.Second, skB.settled(lb, jsB)) {
		t.Errorf("%s: B not settled within 90s", name)
	}
	elapsed := time.Since(start)

	// B: each once, as if A were fine.
	lb.mu.Lock()
	for _, j := range jsB {
		if n := lb.calls[j.ID]; n != 1 {
			t.Errorf("B's %s was handled %d times, want once", j.ID, n)
		}
	}
	lb.mu.Unlock()
	if n := tr.Unreadable(qb); n != 0 {
		t.Errorf("Unreadable(%s) = %d, want 0", qb, n)
	}
	if n := connectionsLost(logs, " consume "+qb); n != 0 {
		t.Errorf("B's consumer lost its connection %d times", n)
	}
	// A: the poison at its head, the rest waiting behind it, and a
	// consumer that reconnects ever more slowly.
	// A message the first connection that died had been sent with the
	// poison comes back with it, in the order the quorum queue returns
	// them, which need not be the order they were published in: one
	// returned ahead of the poison is taken alone on probation and
	// handled. None can be handled more than once, and no more than that
	// first connection held.
	la.mu.Lock()
	handledBehind := 0
	for _, j := range behind {
		switch n := la.calls[j.ID]; {
		case n > 1:
			t.Errorf("A's %s was handled %d times while the poison was at A's head", j.ID, n)
		case n == 1:
			handledBehind++
		}
	}
	la.mu.Unlock()
	if handledBehind > prefetch {
		t.Errorf("%d of A's messages behind the poison were handled while it was at A's head, more than the %d its first connection could hold",
			handledBehind, prefetch)
	}
	if held := queueTotal(t, vh, qa); held != len(behind)+1-handledBehind {
		t.Errorf("A holds %d messages (ready and unacknowledged), want the poison and the %d behind it not handled", held, len(behind)-handledBehind)
	}
	unreadable := tr.Unreadable(qa)
	t.Logf("%s: in %s B's %d messages handled once each; A's consumer lost its connection to the poison %d times; %d of A's messages wait behind it",
		name, elapsed.Round(time.Millisecond), len(jsB), unreadable, len(behind)-handledBehind)
	// Every 25 to 50 ms (the minimum wait, jittered) without the back-off;
	// at most one a second once it has grown to the 2 s cap.
	switch limit := int(2 * elapsed.Seconds()); {
	case unreadable < 2:
		t.Errorf("Unreadable(%s) = %d: the poison never cost A's consumer its connection?", qa, unreadable)
	case unreadable > limit:
		t.Errorf("Unreadable(%s) = %d in %s, over %d: A's reconnects do not back off", qa, unreadable, elapsed, limit)
	}
	if n := len(logs.FilterMessageSnippet("a delivery this client cannot read").FilterField(zap.String("queue", qa)).All()); n != 1 {
		t.Errorf("%d log lines name the unreadable delivery at the head of %s, want 1 (then the repeats)", n, qa)
	}

	// The operator's way out: a delivery limit on A. The messages sent
	// with the poison to the first connection it killed have spent one
	// delivery, which a limit of 1 allows; the poison, sent alone to every
	// later connection, has spent many and goes to A.dlq alone.
	brokertest.Ctl(t, "", "set_policy", "-p", vh, "--apply-to", "queues",
		"acemq-faults-poison", "^"+regexp.QuoteMeta(qa)+"$", `{"delivery-limit": 1}`)
	dlqA := acemq.DeadLetterQueue(qa)
	polltest.Within(t, 30*time.Second, "the poison is dead-lettered and the rest of A handled", func() bool {
		accepted := la.acceptedCopy()
		n := depth(url, dlqA) - 1 // the poison
		for _, j := range behind {
			if accepted[j.ID] > 0 {
				n++
			}
		}
		return n == len(behind)
	})
	settledAt := tr.Unreadable(qa)
	time.Sleep(time.Second)
	if n := tr.Unreadable(qa); n != settledAt {
		t.Errorf("Unreadable(%s) went on from %d to %d after the poison left", qa, settledAt, n)
	}
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	t.Logf("%s: producer: %s", name, stats)
	if stats.failures != 0 {
		t.Errorf("the producer was disturbed: %s", stats)
	}

	// A.dlq, read by the broker: amqp091-go cannot read the poison there
	// either.
	skA := newSink(url, qa)
	jsA := append(append([]job{}, before...), poison)
	var innocent []string
	for _, d := range takeUnreadable(t, "", vh, dlqA) {
		if d.reason != "delivery_limit" || d.queue != qa {
			t.Errorf("%s in %s died of %q in %q, want delivery_limit in %s", d.id, dlqA, d.reason, d.queue, qa)
		}
		skA.dlq[d.id]++
		if d.id != poison.ID {
			innocent = append(innocent, d.id)
		}
	}
	if len(innocent) != 0 {
		t.Errorf("%d of the messages behind the poison were dead-lettered with it: %v", len(innocent), head(innocent))
	}
	if skA.dlq[poison.ID] != 1 {
		t.Errorf("the poison is in %s %d times, want once", dlqA, skA.dlq[poison.ID])
	}
	jsA = append(jsA, behind...)
	t.Logf("%s: the delivery limit dead-lettered the poison and %d of the %d messages behind it", name, len(innocent), len(behind))
	tl := skB.collect(t, name, jsB, lb.acceptedCopy(), pol)
	tl.merge(skA.collect(t, name, jsA, la.acceptedCopy(), pol))
	tl.report(t)
}

// queueTotal is the messages queue holds on the shared node, ready and
// unacknowledged: what rabbitmqctl list_queues calls messages.
func queueTotal(tb testing.TB, vhost, queue string) int {
	tb.Helper()
	out := brokertest.Ctl(tb, "", "list_queues", "-p", vhost, "--no-table-headers", "name", "messages")
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == queue {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				tb.Fatalf("list_queues: %q", line)
			}
			return n
		}
	}
	tb.Fatalf("list_queues does not show %s: %s", queue, out)
	return 0
}

// nestedHeaders is a table nested depth levels deep: RabbitMQ takes it,
// amqp091-go writes it, and amqp091-go's reader refuses it past 32.
func nestedHeaders(depth int) amqp.Table {
	top := amqp.Table{}
	for cur := top; depth > 0; depth-- {
		next := amqp.Table{}
		cur["n"] = next
		cur = next
	}
	return top
}
