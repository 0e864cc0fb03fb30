package faults_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/amqplimit"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
)

// TestFaultUnwritableCopies is issue 15's item 3: messages whose copies
// the client cannot write, among 200 healthy ones published through
// acemq.Publisher on the server's own Transport.
//
//   - (a) A foreign message whose x-acemq-id is 300 bytes, with no
//     message-id: every retry copy and the dead letter would put the id in
//     message-id, a short string (before the fix: 99 handler runs and 147
//     reconnects in 8 s). It is retried and dead-lettered like any other,
//     its id whole in x-acemq-id and no message-id.
//   - (b) A foreign message whose headers fill the content header frame all
//     but the few bytes a dead letter adds: its dead-letter copy is over
//     the limit, refused before a byte is written, and a trimmed copy is
//     parked instead, saying why.
//   - (c) A Publish with a correlation id of 300 bytes fails alone with
//     transport.ErrTooLarge.
//
// No connection is lost, no other publish fails, nothing is lost.
func TestFaultUnwritableCopies(t *testing.T) {
	t.Parallel()
	const name = "unwritable-copies"
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log, logs := observedLogger(t)
	q := "faults." + name
	pol := testPolicy()
	m := newMetrics()
	l := newLedger()
	tr := dial(t, url, log)
	run := serve(t, tr, q, &acemq.Server{Retry: pol, MeterProvider: m.provider}, l.handler(time.Millisecond), log)
	sh := newShelf(url, q)

	healthy := jobs(name, 200)
	stats := &publishStats{}
	sent := make(chan []job, 1)
	go func() { sent <- publishAll(t, tr, q, healthy, 4, 20*time.Millisecond, stats) }()
	polltest.Within(t, 60*time.Second, "the handler is busy", func() bool { return l.totalCalls() > 20 })

	longID := name + "-a-" + strings.Repeat("i", 300-len(name)-3)
	a := job{ID: longID, Always: true}
	b := job{ID: name + "-b", Reject: true}
	propsB := amqp.Publishing{MessageId: b.ID, ContentType: "application/json", DeliveryMode: amqp.Persistent}
	headersB := amqp.Table{acemq.HeaderID: b.ID, "x-blob": ""}
	headersB["x-blob"] = strings.Repeat("b", amqplimit.HeaderLimit(amqplimit.DefaultFrameMax)-8-headerSize(t, propsB, headersB))
	foreign := []amqp.Publishing{
		{Headers: amqp.Table{acemq.HeaderID: a.ID}, ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body(a)},
		{Headers: headersB, MessageId: propsB.MessageId, ContentType: propsB.ContentType, DeliveryMode: propsB.DeliveryMode, Body: body(b)},
	}
	if err := raw(url, func(ch *amqp.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		for i, p := range foreign {
			dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, true, false, p)
			if err != nil {
				return err
			}
			if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
				return fmt.Errorf("foreign message %d not confirmed: %v", i, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("publish the foreign messages: %v", err)
	}
	_, err := (&acemq.Publisher{Transport: tr, Mandatory: true}).Publish(context.Background(), acemq.Outgoing{
		RoutingKey: q, ID: name + "-c", CorrelationID: strings.Repeat("c", 300), Body: body(job{ID: name + "-c"})})
	var pe *acemq.PublishError
	if !errors.Is(err, transport.ErrTooLarge) || !errors.As(err, &pe) {
		t.Errorf("Publish with a correlation id of 300 bytes = %v, want a *PublishError that is ErrTooLarge", err)
	}

	published := append(<-sent, a, job{ID: b.ID, Park: true}) // b's dead letter is parked instead
	if !polltest.Until(60*time.Second, sh.settled(l, published)) {
		t.Errorf("%s: not settled within 60s", name)
	}
	time.Sleep(500 * time.Millisecond) // a copy that loops would show itself
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	t.Logf("%s: producer: %s", name, stats)
	if stats.failures != 0 {
		t.Errorf("%d publishes besides the one with the long correlation id failed: %s", stats.failures, stats)
	}
	if n := connectionsLost(logs, ""); n != 0 {
		t.Errorf("%d connections lost: %v", n, logs.FilterMessage("acemq: connection lost, reconnecting").All()[0].ContextMap())
	}

	l.mu.Lock()
	callsA, callsB := l.calls[a.ID], l.calls[b.ID]
	l.mu.Unlock()
	if d, where, ok := sh.find(a.ID); !ok || where != endDLQ {
		t.Errorf("(a) the long id is not in %s (found: %v in %q)", acemq.DeadLetterQueue(q), ok, where)
	} else {
		id, _ := d.Headers[acemq.HeaderID].(string)
		if id != a.ID || d.MessageId != "" || !strings.HasPrefix(reasonOf(d), "exhausted 4 attempts: ") {
			t.Errorf("(a) dead letter: x-acemq-id of %d bytes (intact %v), message-id %q, reason %q", len(id), id == a.ID, d.MessageId, reasonOf(d))
		}
	}
	if callsA != pol.MaxAttempts() {
		t.Errorf("(a) handled %d times, want the policy's %d attempts", callsA, pol.MaxAttempts())
	}
	if d, where, ok := sh.find(b.ID); !ok || where != endParked {
		t.Errorf("(b) is not in %s (found: %v in %q)", acemq.ParkedQueue(q), ok, where)
	} else {
		_, blob := d.Headers["x-blob"]
		if blob || !strings.HasPrefix(reasonOf(d), "could not be written: headers is ") || string(d.Body) != string(body(b)) {
			t.Errorf("(b) parked copy: blob kept %v, reason %q, body %q", blob, reasonOf(d), d.Body)
		}
		t.Logf("(b) parked: %s", reasonOf(d))
	}
	if callsB != 1 {
		t.Errorf("(b) handled %d times, want once", callsB)
	}
	if got := m.counter(t, acemq.MetricDeadLettered, map[string]string{"outcome": "unwritable"}); got != 1 {
		t.Errorf("%s{outcome=unwritable} = %d, want 1", acemq.MetricDeadLettered, got)
	}
	r := sh.collect(t, name, published, l.acceptedCopy(), pol).report(t)
	if r.duplicates != 0 {
		t.Errorf("%d duplicates: a copy went round again", r.duplicates)
	}
}

// headerSize is the content header frame payload of p with headers, as
// amqp091-go writes it.
func headerSize(tb testing.TB, p amqp.Publishing, headers amqp.Table) int {
	tb.Helper()
	props := transport.Properties{MessageID: p.MessageId, ContentType: p.ContentType, DeliveryMode: p.DeliveryMode}
	n, err := amqplimit.Measure(&props, headers, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
