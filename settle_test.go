package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// recorder is a handler that answers from a script and records what it saw.
type recorder struct {
	mu     sync.Mutex
	seen   []acemq.Envelope
	answer func(m *acemq.Message) ack.Ack
}

func (r *recorder) ServeMessage(_ context.Context, m *acemq.Message) ack.Ack {
	r.mu.Lock()
	r.seen = append(r.seen, m.Envelope())
	r.mu.Unlock()
	return r.answer(m)
}

func (r *recorder) envelopes() []acemq.Envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]acemq.Envelope(nil), r.seen...)
}

func (r *recorder) count() int { return len(r.envelopes()) }

func always(a ack.Ack) *recorder { return &recorder{answer: func(*acemq.Message) ack.Ack { return a }} }

func TestAcceptAcks(t *testing.T) {
	t.Parallel()
	h := always(ack.Accept())
	f := start(t, &acemq.Server{}, map[string]acemq.Handler{"orders": h})
	res := f.publish("orders", `{"id":1}`, map[string]any{"trace": "t-1"})
	f.eventually("handled and acked", func() bool { return h.count() == 1 && f.broker.Unacked("orders") == 0 })
	env := h.envelopes()[0]
	if env.ID != res.ID || env.Attempt != 1 || env.Redelivered || env.Queue != "orders" || env.RoutingKey != "orders" {
		t.Errorf("envelope %+v (published id %s)", env, res.ID)
	}
	if f.broker.Depth("orders") != 0 || f.broker.Depth("orders.dlq") != 0 {
		t.Error("an accepted message is still somewhere")
	}
	f.counterReaches(acemq.MetricHandled, map[string]string{"queue": "orders", "outcome": "accept"}, 1)
}

func TestRetryInProcessThenSucceed(t *testing.T) {
	t.Parallel()
	h := &recorder{answer: func(m *acemq.Message) ack.Ack {
		if m.Attempt() < 3 {
			return ack.Retry(errBoom)
		}
		return ack.Accept()
	}}
	f := start(t, &acemq.Server{Retry: retry.Fixed(5, 2*time.Second)}, map[string]acemq.Handler{"orders": h})
	res := f.publish("orders", "{}", nil)
	f.eventually("first attempt", func() bool { return h.count() == 1 })
	if f.broker.Unacked("orders") != 1 {
		t.Error("an in-process wait must hold the delivery")
	}
	f.advance(1, 2*time.Second)
	f.eventually("second attempt", func() bool { return h.count() == 2 })
	f.advance(1, 2*time.Second)
	f.eventually("third attempt, accepted", func() bool { return h.count() == 3 && f.broker.Unacked("orders") == 0 })
	for i, env := range h.envelopes() {
		if env.ID != res.ID || env.Attempt != i+1 || env.Redelivered {
			t.Errorf("attempt %d: envelope %+v", i+1, env)
		}
	}
	f.counterReaches(acemq.MetricRetries, map[string]string{"where": "process"}, 2)
	if f.broker.Depth("orders.dlq") != 0 {
		t.Error("a message that succeeded was dead-lettered")
	}
}

func TestExhaustedGoesToTheDeadLetterQueue(t *testing.T) {
	t.Parallel()
	h := always(ack.Retry(errBoom))
	f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Second)}, map[string]acemq.Handler{"orders": h})
	res := f.publish("orders", `{"id":9}`, map[string]any{"tenant": "eu"})
	f.eventually("attempt 1", func() bool { return h.count() == 1 })
	f.advance(1, time.Second)
	f.eventually("attempt 2", func() bool { return h.count() == 2 })
	f.advance(1, time.Second)
	d := f.only("orders.dlq")
	if got := d.Headers["x-acemq-error"]; got != "exhausted 3 attempts: the warehouse is not answering" {
		t.Errorf("reason %q", got)
	}
	if d.Headers["x-acemq-id"] != res.ID || fmt.Sprint(d.Headers["x-acemq-attempt"]) != "3" || d.Headers["tenant"] != "eu" || string(d.Body) != `{"id":9}` {
		t.Errorf("dead letter headers %v body %s", d.Headers, d.Body)
	}
	env := acemq.EnvelopeOf(d)
	if env.Error == "" || env.Exchange != "" || env.RoutingKey != "orders" {
		t.Errorf("a dead-letter reader sees %+v", env)
	}
	f.eventually("original acked", func() bool { return f.broker.Unacked("orders") == 0 && f.broker.Depth("orders") == 0 })
	f.counterReaches(acemq.MetricDeadLettered, map[string]string{"outcome": "exhausted"}, 1)
	if f.logs.FilterMessage("acemq: message given up on").Len() != 1 {
		t.Error("no log line for the message given up on")
	}
}

// TestLadderThroughRungs follows the seed's ladder: waits under the
// threshold in the process, at or above it on rung queues named by delay.
func TestLadderThroughRungs(t *testing.T) {
	t.Parallel()
	h := always(ack.Retry(errBoom))
	policy := retry.Exponential(6, 10*time.Second, 0).WithJitter(0)
	f := start(t, &acemq.Server{Retry: policy}, map[string]acemq.Handler{"shipping.orders": h})
	for _, rung := range []string{"shipping.orders.retry.40s", "shipping.orders.retry.1m20s", "shipping.orders.retry.2m40s"} {
		q, ok := f.broker.Queue(rung)
		if !ok || fmt.Sprint(q.Args) != fmt.Sprint(retry.RungArgs("shipping.orders", mustParse(t, strings.TrimPrefix(rung, "shipping.orders.retry.")))) {
			t.Fatalf("rung %s declared as %+v", rung, q)
		}
	}
	f.publish("shipping.orders", "{}", nil)
	f.eventually("attempt 1", func() bool { return h.count() == 1 })
	f.advance(1, 10*time.Second) // in process
	f.eventually("attempt 2", func() bool { return h.count() == 2 })
	f.advance(1, 20*time.Second) // in process
	f.eventually("attempt 3", func() bool { return h.count() == 3 })
	// 40s is at the threshold: the copy waits on the rung, the original is acked.
	f.eventually("the copy on the 40s rung", func() bool { return f.broker.Depth("shipping.orders.retry.40s") == 1 })
	f.eventually("a broker wait holds no delivery", func() bool { return f.broker.Unacked("shipping.orders") == 0 })
	f.broker.Clock().Advance(40 * time.Second)
	f.eventually("attempt 4", func() bool { return h.count() == 4 })
	f.eventually("the copy on the 1m20s rung", func() bool { return f.broker.Depth("shipping.orders.retry.1m20s") == 1 })
	f.broker.Clock().Advance(80 * time.Second)
	f.eventually("attempt 5", func() bool { return h.count() == 5 })
	f.eventually("the copy on the 2m40s rung", func() bool { return f.broker.Depth("shipping.orders.retry.2m40s") == 1 })
	f.broker.Clock().Advance(160 * time.Second)
	d := f.only("shipping.orders.dlq")
	if d.Headers["x-acemq-error"] != "exhausted 6 attempts: the warehouse is not answering" {
		t.Errorf("reason %q", d.Headers["x-acemq-error"])
	}
	for _, broker := range []string{"x-death", "x-first-death-reason", "x-first-death-queue", "x-first-death-exchange"} {
		if _, ok := d.Headers[broker]; ok {
			t.Errorf("the dead letter carries the broker's %s", broker)
		}
	}
	envs := h.envelopes()
	for i, env := range envs {
		if env.Attempt != i+1 || env.ID != envs[0].ID || env.Exchange != "" || env.RoutingKey != "shipping.orders" {
			t.Errorf("attempt %d: %+v", i+1, env)
		}
	}
	f.counterReaches(acemq.MetricRetries, map[string]string{"where": "broker"}, 3)
}

func mustParse(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestGiveUpReasons(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		srv    *acemq.Server
		h      acemq.Handler
		body   string
		dest   string
		reason string
		cause  string
	}{
		{"fatal skips the attempts left", &acemq.Server{Retry: retry.Fixed(5, time.Second)},
			always(ack.Retry(fmt.Errorf("lookup: %w", ack.Fatal(errors.New("no such customer"))))),
			"{}", "q.dlq", "the handler rejected it: lookup: no such customer", "rejected"},
		{"dead-letter skips the ladder", &acemq.Server{Retry: retry.Fixed(5, time.Second)},
			always(ack.DeadLetter(errors.New("no such customer"))),
			"{}", "q.dlq", "the handler rejected it: no such customer", "rejected"},
		{"retry without a policy says so", &acemq.Server{},
			always(ack.Retry(errBoom)),
			"{}", "q.dlq", "retry requested but no retry policy is set, so one delivery is all it gets: the warehouse is not answering", "no_policy"},
		{"retry under None is one delivery too", &acemq.Server{Retry: retry.None()},
			always(ack.Retry(errBoom)),
			"{}", "q.dlq", "exhausted 1 attempts: the warehouse is not answering", "exhausted"},
		{"handler park", &acemq.Server{Retry: retry.Fixed(5, time.Second)},
			always(ack.Park(errors.New("schema v9 unknown"))),
			"{}", "q.parked", "the handler parked it: schema v9 unknown", "parked"},
		{"decode middleware parks non-JSON", &acemq.Server{Retry: retry.Fixed(5, time.Second)},
			middleware.Decode(codec.JSON)(always(ack.Accept())),
			"<xml/>", "q.parked", "could not be decoded: acemq: this message is not JSON: 6 bytes that do not parse", "parked"},
		{"decode middleware parks an empty body", &acemq.Server{},
			middleware.Decode(codec.JSON)(always(ack.Accept())),
			"", "q.parked", "could not be decoded: acemq: this message is not JSON: 0 bytes that do not parse", "parked"},
		{"typed handler parks wrong types", &acemq.Server{},
			acemq.Decoded(codec.JSON, func(context.Context, *acemq.Message, struct{ N int }) ack.Ack { return ack.Accept() }),
			`{"N":"seven"}`, "q.parked", "could not be decoded: acemq: this message is JSON of the wrong shape: json: cannot unmarshal string into Go struct field .N of type int", "parked"},
		{"a panic follows the policy", &acemq.Server{},
			acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { panic("nil map") }),
			"{}", "q.dlq", "retry requested but no retry policy is set, so one delivery is all it gets: acemq: handler panicked: nil map", "no_policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := start(t, tt.srv, map[string]acemq.Handler{"q": tt.h})
			f.publish("q", tt.body, nil)
			d := f.only(tt.dest)
			if got := d.Headers["x-acemq-error"]; got != tt.reason {
				t.Errorf("reason\n got %q\nwant %q", got, tt.reason)
			}
			if fmt.Sprint(d.Headers["x-acemq-attempt"]) != "1" || string(d.Body) != tt.body {
				t.Errorf("attempt %v body %q", d.Headers["x-acemq-attempt"], d.Body)
			}
			f.eventually("original acked", func() bool { return f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
			f.counterReaches(acemq.MetricDeadLettered, map[string]string{"outcome": tt.cause, "queue": "q"}, 1)
		})
	}
}

func TestMaxAgeGivesUpBeforeRetrying(t *testing.T) {
	t.Parallel()
	h := always(ack.Retry(errBoom))
	f := start(t, &acemq.Server{Retry: retry.Fixed(10, time.Minute).WithMaxAge(90 * time.Second)}, map[string]acemq.Handler{"q": h})
	f.publish("q", "{}", nil)
	f.eventually("attempt 1", func() bool { return h.count() == 1 })
	f.eventually("on the rung", func() bool { return f.broker.Depth("q.retry.1m") == 1 })
	f.broker.Clock().Advance(time.Minute)
	f.eventually("attempt 2", func() bool { return h.count() == 2 })
	f.eventually("on the rung", func() bool { return f.broker.Depth("q.retry.1m") == 1 })
	f.broker.Clock().Advance(time.Minute) // now 2 minutes old
	d := f.only("q.dlq")
	if got := d.Headers["x-acemq-error"]; got != "exceeded the maximum message age of 1m30s: the warehouse is not answering" {
		t.Errorf("reason %q", got)
	}
	if h.count() != 3 {
		t.Errorf("handled %d times, want 3", h.count())
	}
}

func TestRequeueIsRedeliveredNotANewAttempt(t *testing.T) {
	t.Parallel()
	h := &recorder{answer: func(m *acemq.Message) ack.Ack {
		if !m.Envelope().Redelivered {
			return ack.Requeue()
		}
		return ack.Accept()
	}}
	f := start(t, &acemq.Server{}, map[string]acemq.Handler{"q": h})
	f.publish("q", "{}", nil)
	f.eventually("handled twice", func() bool { return h.count() == 2 && f.broker.Unacked("q") == 0 })
	second := h.envelopes()[1]
	if !second.Redelivered || second.Attempt != 1 {
		t.Errorf("a requeued message is redelivered on the same attempt: %+v", second)
	}
}

// TestRepublishStripsBrokerHeaders: a copy that kept x-death naming its
// queue would be dropped by RabbitMQ as a cycle; CC would route it twice.
func TestRepublishStripsBrokerHeaders(t *testing.T) {
	t.Parallel()
	f := start(t, &acemq.Server{Retry: retry.Fixed(2, time.Second)}, map[string]acemq.Handler{"q": always(ack.Retry(errBoom))})
	f.conn.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: "audit", Durable: true}}})
	_, err := f.conn.Publish(context.Background(), transport.Publishing{
		RoutingKey: "q", Mandatory: true,
		Headers: map[string]any{
			"x-acemq-id": "m-1", "x-delivery-count": int64(3), "x-first-death-reason": "expired",
			"x-last-death-queue": "q", "x-death": []any{map[string]any{"queue": "q", "reason": "expired", "count": int64(1)}},
			"x-acemq-error": "stale reason", "keep": "me",
		},
		Properties: transport.Properties{Expiration: "600000", MessageID: "m-1"},
		Body:       []byte("{}"),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.advance(1, time.Second)
	d := f.only("q.dlq")
	for k := range d.Headers {
		if k == "x-death" || k == "x-delivery-count" || strings.HasPrefix(k, "x-first-death") || strings.HasPrefix(k, "x-last-death") {
			t.Errorf("copy carries the broker's %s", k)
		}
	}
	if d.Headers["keep"] != "me" || d.Expiration != "" || d.Headers["x-acemq-id"] != "m-1" {
		t.Errorf("copy headers %v expiration %q", d.Headers, d.Expiration)
	}
	if f.broker.Depth("audit") != 0 {
		t.Error("routed to a CC queue")
	}
}

// TestHugeBodies: an 8 MiB body that is not JSON is parked whole; one that
// is JSON is handled. Neither panics or loops.
func TestHugeBodies(t *testing.T) {
	t.Parallel()
	h := always(ack.Accept())
	f := start(t, &acemq.Server{}, map[string]acemq.Handler{"q": middleware.Decode(codec.JSON)(h)})
	huge := strings.Repeat("x", 8<<20)
	f.publish("q", huge, nil)
	if d := f.only("q.parked"); len(d.Body) != len(huge) || !strings.HasPrefix(fmt.Sprint(d.Headers["x-acemq-error"]), "could not be decoded: ") {
		t.Errorf("parked %d bytes, reason %v", len(d.Body), d.Headers["x-acemq-error"])
	}
	f.publish("q", `"`+huge+`"`, nil)
	f.eventually("the JSON one handled", func() bool { return h.count() == 1 && f.broker.Unacked("q") == 0 })
}

// TestMalformedHeadersThroughTheServer: headers of the wrong types reach the
// handler with safe defaults, and a retry of such a message gets the
// contract's headers written properly.
func TestMalformedHeadersThroughTheServer(t *testing.T) {
	t.Parallel()
	h := &recorder{answer: func(m *acemq.Message) ack.Ack {
		if m.Attempt() == 1 {
			return ack.Retry(errBoom)
		}
		return ack.Accept()
	}}
	f := start(t, &acemq.Server{Retry: retry.Fixed(2, time.Second)}, map[string]acemq.Handler{"q": h})
	_, err := f.conn.Publish(context.Background(), transport.Publishing{RoutingKey: "q", Body: []byte("{}"), Headers: map[string]any{
		"x-acemq-id": int64(42), "x-acemq-attempt": "one", "x-acemq-created": []any{"nope"}, "x-acemq-error": 3.5,
		"x-acemq-exchange": map[string]any{"x": 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.eventually("attempt 1", func() bool { return h.count() == 1 })
	f.advance(1, time.Second)
	f.eventually("attempt 2", func() bool { return h.count() == 2 })
	envs := h.envelopes()
	if envs[0].ID == "" || envs[0].ID != envs[1].ID || envs[0].Attempt != 1 || envs[1].Attempt != 2 || envs[0].CreatedAt.IsZero() {
		t.Errorf("envelopes %+v", envs)
	}
}
