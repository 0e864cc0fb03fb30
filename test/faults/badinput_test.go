package faults_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/middleware"
)

// badCase is one message a raw client sends, not through our publisher,
// and where it must end. Each is told apart by its correlation id, the only
// thing about it the test trusts.
type badCase struct {
	name    string
	body    []byte
	headers amqp.Table
	props   func(*amqp.Publishing)
	// end is where it must end; calls is the most handler calls it may
	// take (the policy's four attempts at most: more is a loop); reason is
	// what its x-acemq-error must start with, on a dead letter or parked.
	end    string
	calls  int
	reason string
}

// payload is what the queue's handler expects.
type payload struct {
	N     int    `json:"n"`
	Fail  bool   `json:"fail,omitempty"`  // asks for a retry every time
	Panic bool   `json:"panic,omitempty"` // panics
	Pad   string `json:"pad,omitempty"`
}

const (
	reasonParked    = "could not be decoded: "
	reasonExhausted = "exhausted 4 attempts: "
	reasonTooOld    = "exceeded the maximum message age of 1h0m0s: "
)

func badCases(queue string) []badCase {
	fail := []byte(`{"n":1,"fail":true}`)
	ok := []byte(`{"n":1}`)
	now := time.Now()
	big := 10 << 20
	return []badCase{
		{name: "not-json", body: []byte("this is not JSON"), end: endParked, calls: 0, reason: reasonParked},
		{name: "empty-body", body: nil, end: endParked, calls: 0, reason: reasonParked},
		{name: "huge-not-json", body: []byte(strings.Repeat("x", big)), end: endParked, calls: 0, reason: reasonParked},
		{name: "huge-json", body: []byte(`{"n":1,"pad":"` + strings.Repeat("y", big) + `"}`), end: endAccepted, calls: 1},
		{name: "wrong-type", body: []byte(`{"n":"seven"}`), end: endParked, calls: 0, reason: reasonParked},
		{name: "json-array", body: []byte(`[1,2,3]`), end: endParked, calls: 0, reason: reasonParked},
		{name: "attempt-string", headers: amqp.Table{acemq.HeaderAttempt: "3"}, body: fail, end: endDLQ, calls: 2, reason: reasonExhausted},
		{name: "attempt-garbage-string", headers: amqp.Table{acemq.HeaderAttempt: "three"}, body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "attempt-float", headers: amqp.Table{acemq.HeaderAttempt: 2.5}, body: fail, end: endDLQ, calls: 3, reason: reasonExhausted},
		{name: "attempt-negative", headers: amqp.Table{acemq.HeaderAttempt: int32(-5)}, body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "attempt-over-int32", headers: amqp.Table{acemq.HeaderAttempt: int64(1) << 40}, body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "attempt-table", headers: amqp.Table{acemq.HeaderAttempt: amqp.Table{"n": int32(2)}}, body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "attempt-bool", headers: amqp.Table{acemq.HeaderAttempt: true}, body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "attempt-past-max", headers: amqp.Table{acemq.HeaderAttempt: int32(100)}, body: fail, end: endDLQ, calls: 1, reason: "exhausted 100 attempts: "},
		{name: "missing-id", headers: amqp.Table{}, body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "id-not-a-string", headers: amqp.Table{acemq.HeaderID: int32(42)}, body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "invalid-utf8-headers", headers: amqp.Table{acemq.HeaderID: "id-\xff\xfe", "x-note": "\xc3\x28", acemq.HeaderError: "\xed\xa0\x80"},
			body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "created-in-the-future", headers: amqp.Table{acemq.HeaderCreated: now.Add(365 * 24 * time.Hour).UnixMilli()}, body: ok, end: endAccepted, calls: 1},
		{name: "created-unparseable", headers: amqp.Table{acemq.HeaderCreated: "yesterday at noon"}, body: ok, end: endAccepted, calls: 1},
		{name: "created-a-table", headers: amqp.Table{acemq.HeaderCreated: amqp.Table{"ms": int64(1)}}, body: ok, end: endAccepted, calls: 1},
		{name: "created-1970", headers: amqp.Table{acemq.HeaderCreated: int64(1)}, body: ok, end: endDLQ, calls: 0, reason: reasonTooOld},
		// A forged x-death naming the rung: republished unstripped, the
		// broker would drop it as a dead-letter cycle on its way home.
		{name: "forged-x-death", headers: amqp.Table{"x-death": []any{amqp.Table{
			"queue": queue + ".retry.200ms", "reason": "expired", "count": int64(1), "exchange": "",
			"routing-keys": []any{queue + ".retry.200ms"},
		}}, "x-first-death-queue": queue, "CC": []any{queue}}, body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "odd-header-types", headers: amqp.Table{"x-weird": amqp.Table{
			"decimal": amqp.Decimal{Scale: 2, Value: 12345}, "time": now, "bytes": []byte{0, 1, 2},
			"array": []any{nil, true, int8(-1), float32(1.5), amqp.Table{}},
		}, "x-byte": byte(7)}, body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "per-message-ttl", props: func(p *amqp.Publishing) { p.Expiration = "60000" }, body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "handler-panics", body: []byte(`{"n":1,"panic":true}`), end: endDLQ, calls: 4, reason: reasonExhausted},
		{name: "huge-header", headers: amqp.Table{"x-big": strings.Repeat("h", 60_000)}, body: fail, end: endDLQ, calls: 4, reason: reasonExhausted},
	}
}

// TestFaultBadInput sends what a careless or hostile producer might,
// straight to the queue: each message is parked or dead-lettered with a
// reason, or handled; no panic takes the server down, no message loops.
func TestFaultBadInput(t *testing.T) {
	t.Parallel()
	const name = "bad-input"
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log := testLogger(t)
	q := "faults." + name
	pol := testPolicy()
	tr := dial(t, url, log)
	if err := tr.Declare(context.Background(), acemq.Topology(q, pol, nil)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	calls, accepted, ids := map[string]int{}, map[string]int{}, map[string]map[string]bool{}
	h := acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, p payload) ack.Ack {
		c := m.Envelope().CorrelationID
		mu.Lock()
		calls[c]++
		if ids[c] == nil {
			ids[c] = map[string]bool{}
		}
		ids[c][m.ID()] = true
		mu.Unlock()
		switch {
		case p.Panic:
			var nilMap map[string]int
			//lint:ignore SA5000 a handler bug this input sets off, on purpose
			nilMap["boom"]++
		case p.Fail:
			return ack.Retry(errScripted)
		}
		mu.Lock()
		accepted[c]++
		mu.Unlock()
		return ack.Accept()
	})
	mux := acemq.NewMux()
	mux.Use(middleware.MaxAge(time.Hour), middleware.Decode(codec.JSON))
	mux.Handle(q, h)
	run := serve(t, tr, q, &acemq.Server{Handler: mux, Retry: pol}, nil, log)

	cases := badCases(q)
	if err := raw(url, func(ch *amqp.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		for _, c := range cases {
			p := amqp.Publishing{Headers: c.headers, Body: c.body, CorrelationId: c.name, DeliveryMode: amqp.Persistent}
			if p.Headers == nil {
				p.Headers = amqp.Table{acemq.HeaderID: "bad-" + c.name}
			}
			if c.props != nil {
				c.props(&p)
			}
			dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, true, false, p)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
				return fmt.Errorf("%s: not confirmed: %v", c.name, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	published := make([]job, len(cases))
	for i, c := range cases {
		published[i] = job{ID: c.name, Always: c.end == endDLQ, Park: c.end == endParked}
	}
	reasons := map[string]string{}
	var rmu sync.Mutex
	takeReasons := func(queue string, into map[string]int) {
		_ = raw(url, func(ch *amqp.Channel) error {
			for {
				d, ok, err := ch.Get(queue, false)
				if err != nil || !ok {
					return err
				}
				rmu.Lock()
				into[d.CorrelationId]++
				if s, ok := d.Headers[acemq.HeaderError].(string); ok {
					reasons[d.CorrelationId] = s
				}
				rmu.Unlock()
				if err := d.Ack(false); err != nil {
					return err
				}
			}
		})
	}
	dlq, parked := map[string]int{}, map[string]int{}
	if !polltest.Until(60*time.Second, func() bool {
		takeReasons(acemq.DeadLetterQueue(q), dlq)
		takeReasons(acemq.ParkedQueue(q), parked)
		mu.Lock()
		defer mu.Unlock()
		for _, c := range cases {
			if accepted[c.name]+dlq[c.name]+parked[c.name] == 0 {
				return false
			}
		}
		return true
	}) {
		t.Errorf("%s: not settled within 60s", name)
	}
	// Let anything that would loop show itself before counting calls.
	time.Sleep(time.Second)
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	takeReasons(acemq.DeadLetterQueue(q), dlq)
	takeReasons(acemq.ParkedQueue(q), parked)
	tl := &tally{name: name, published: published, dlq: dlq, parked: parked, queued: map[string]int{}}
	mu.Lock()
	tl.accepted = accepted
	mu.Unlock()
	queued := map[string]int{}
	for _, qn := range []string{q, q + ".retry.200ms", q + ".retry.400ms"} {
		takeReasons(qn, queued)
	}
	tl.queued = queued
	tl.report(t)

	mu.Lock()
	defer mu.Unlock()
	for _, c := range cases {
		if calls[c.name] > c.calls {
			t.Errorf("%s: %d handler calls, want at most %d", c.name, calls[c.name], c.calls)
		}
		if c.end != endAccepted && !strings.HasPrefix(reasons[c.name], c.reason) {
			t.Errorf("%s: reason %q, want it to start with %q", c.name, reasons[c.name], c.reason)
		}
		if len(ids[c.name]) > 1 {
			t.Errorf("%s: the handler saw %d ids for one message: %v", c.name, len(ids[c.name]), ids[c.name])
		}
		t.Logf("%-24s calls=%d accepted=%d dlq=%d parked=%d reason=%q", c.name, calls[c.name], accepted[c.name], dlq[c.name], parked[c.name], reasons[c.name])
	}
	if n := calls["handler-panics"]; n == 0 {
		t.Error("the panicking handler never ran")
	}
	if !strings.Contains(reasons["handler-panics"], "panicked") {
		t.Errorf("the panic's dead letter does not say it panicked: %q", reasons["handler-panics"])
	}
}
