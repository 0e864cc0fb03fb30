package acemq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/internal/polltest"

	amqp "github.com/rabbitmq/amqp091-go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap/zaptest"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The settlement tests again, on a real RabbitMQ, with delays small enough
// to run fast: the threshold is lowered so that rungs of 200 ms are used.

// rabbit is one test's connection to the broker of ACEMQ_AMQP_URL.
type rabbit struct {
	t      *testing.T
	url    string
	tr     *rabbitmq.Transport
	admin  *amqp.Channel
	meters *sdkmetric.MeterProvider // every server's here, so that the reader sees them all
	reader *sdkmetric.ManualReader
}

func newRabbit(t *testing.T) *rabbit {
	t.Helper()
	url := brokertest.SharedURL(t)
	r := &rabbit{t: t, url: url, tr: dialRabbit(t, url)}
	r.meters, r.reader = metrictest.New(t)
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if r.admin, err = conn.Channel(); err != nil {
		t.Fatal(err)
	}
	return r
}

func dialRabbit(t *testing.T, url string) *rabbitmq.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr, err := rabbitmq.Dial(ctx, url, rabbitmq.WithLogger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// queue returns a queue name unique to this run.
func (r *rabbit) queue() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "it." + strings.ReplaceAll(r.t.Name(), "/", ".") + "." + hex.EncodeToString(b)
}

// serve runs a server for queue with handler h on tr until the test ends.
func (r *rabbit) serve(tr transport.Transport, queue string, srv *acemq.Server, h acemq.Handler) {
	r.t.Helper()
	mux := acemq.NewMux()
	mux.Handle(queue, h)
	srv.Handler = mux
	r.serveMux(tr, srv)
}

// serveMux runs srv, its Handler set, on tr until the test ends.
func (r *rabbit) serveMux(tr transport.Transport, srv *acemq.Server) {
	r.t.Helper()
	srv.Transport = tr
	srv.Logger = zaptest.NewLogger(r.t)
	srv.MeterProvider = r.meters
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-done; err != nil {
			r.t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-srv.Ready():
	case <-time.After(60 * time.Second):
		r.t.Fatalf("the server did not subscribe to %v in 60s", srv.Handler.(interface{ Queues() []string }).Queues())
	}
}

func (r *rabbit) publish(queue, body string) acemq.PublishResult {
	r.t.Helper()
	res, err := (&acemq.Publisher{Transport: r.tr, Mandatory: true}).Publish(context.Background(), acemq.Outgoing{RoutingKey: queue, Body: []byte(body)})
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

func (r *rabbit) eventually(what string, cond func() bool) {
	r.t.Helper()
	polltest.Eventually(r.t, what, cond)
}

// take waits for the one message in queue and takes it.
func (r *rabbit) take(queue string) transport.Delivery {
	r.t.Helper()
	var d transport.Delivery
	r.eventually("a message in "+queue, func() bool {
		got, ok, err := r.tr.Get(context.Background(), queue)
		if err != nil {
			r.t.Fatal(err)
		}
		d = got
		return ok
	})
	if err := d.Ack(); err != nil {
		r.t.Fatal(err)
	}
	return d
}

func (r *rabbit) depth(queue string) int {
	info, err := r.tr.Inspect(context.Background(), queue)
	if err != nil {
		return -1
	}
	return info.Messages
}

func (r *rabbit) counter(name string, attrs map[string]string) int64 {
	r.t.Helper()
	return metrictest.Sum(r.t, r.reader, name, attrs)
}

func TestRabbitLadderToDeadLetters(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	h := always(ack.Retry(errBoom))
	policy := retry.Exponential(5, 50*time.Millisecond, 0).WithJitter(0).WithBrokerWaitThreshold(200 * time.Millisecond)
	r.serve(r.tr, q, &acemq.Server{Retry: policy}, h)
	// The rungs are declared with exactly the contract's arguments: a
	// passive check by name, and a redeclare with those arguments is a no-op.
	for _, d := range policy.BrokerRungs() {
		if _, err := r.admin.QueueDeclare(retry.RungName(q, d), true, false, false, false, amqp.Table(retry.RungArgs(q, d))); err != nil {
			t.Fatalf("rung %s is not the contract's: %v", retry.RungName(q, d), err)
		}
	}
	res := r.publish(q, `{"n":1}`)
	d := r.take(acemq.DeadLetterQueue(q))
	if got := d.Headers[acemq.HeaderError]; got != "exhausted 5 attempts: the warehouse is not answering" {
		t.Errorf("reason %q", got)
	}
	env := acemq.EnvelopeOf(d)
	if env.ID != res.ID || env.Attempt != 5 || env.RoutingKey != q || string(d.Body) != `{"n":1}` {
		t.Errorf("dead letter %+v", env)
	}
	if _, ok := d.Headers["x-death"]; ok {
		t.Error("the dead letter carries the broker's x-death")
	}
	envs := h.envelopes()
	if len(envs) != 5 {
		t.Fatalf("%d attempts, want 5", len(envs))
	}
	for i, e := range envs {
		if e.Attempt != i+1 || e.ID != res.ID {
			t.Errorf("attempt %d: %+v", i+1, e)
		}
	}
	if got := r.counter(acemq.MetricRetries, map[string]string{"where": "broker"}); got != 2 {
		t.Errorf("retries on rungs = %d, want 2 (200ms and 400ms)", got)
	}
}

func TestRabbitParked(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	h := always(ack.Accept())
	r.serve(r.tr, q, &acemq.Server{}, middleware.Decode(codec.JSON)(h))
	r.publish(q, "not json")
	d := r.take(acemq.ParkedQueue(q))
	if got := d.Headers[acemq.HeaderError]; got != "could not be decoded: acemq: this message is not JSON: 8 bytes that do not parse" {
		t.Errorf("reason %q", got)
	}
	if h.count() != 0 {
		t.Error("the handler saw a body that is not JSON")
	}
}

func TestRabbitMissingRung(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	h := &recorder{answer: func(m *acemq.Message) ack.Ack {
		if m.Attempt() == 1 {
			return ack.Retry(errBoom)
		}
		return ack.Accept()
	}}
	r.serve(r.tr, q, &acemq.Server{Retry: retry.Fixed(2, 300*time.Millisecond).WithBrokerWaitThreshold(100 * time.Millisecond)}, h)
	rung := q + ".retry.300ms"
	if _, err := r.admin.QueueDelete(rung, false, false, false); err != nil {
		t.Fatal(err)
	}
	r.publish(q, "{}")
	r.eventually("attempt 2 accepted", func() bool { return h.count() == 2 })
	if got := r.counter(acemq.MetricRungMissing, map[string]string{"rung": rung}); got != 1 {
		t.Errorf("rung.missing = %d", got)
	}
}

func TestRabbitDeadLetterQueueMissing(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	graveyard := q + ".graveyard"
	if _, err := r.admin.QueueDeclare(graveyard, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.admin.QueueDelete(graveyard, false, false, false) })
	// The queue's own dead-lettering is the last resort.
	args := map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": graveyard}
	r.serve(r.tr, q, &acemq.Server{Queues: map[string]acemq.QueueConfig{q: {Args: args}}}, always(ack.DeadLetter(errors.New("no such customer"))))
	if _, err := r.admin.QueueDelete(acemq.DeadLetterQueue(q), false, false, false); err != nil {
		t.Fatal(err)
	}
	r.publish(q, "{}")
	d := r.take(graveyard)
	if _, ok := d.Headers["x-death"]; !ok {
		t.Errorf("not dead-lettered by the broker: %v", d.Headers)
	}
	r.eventually("counted", func() bool { return r.counter(acemq.MetricSetAsideFailed, map[string]string{"queue": q}) == 1 })
	if r.depth(q) != 0 {
		t.Error("the original is still in its queue")
	}
}

func TestRabbitCompetingServers(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	a, b := always(ack.Accept()), always(ack.Accept())
	r.serve(r.tr, q, &acemq.Server{Concurrency: 1, Prefetch: 1}, a)
	r.serve(dialRabbit(t, r.url), q, &acemq.Server{Concurrency: 1, Prefetch: 1}, b)
	r.eventually("two consumers", func() bool {
		info, err := r.tr.Inspect(context.Background(), q)
		return err == nil && info.Consumers == 2
	})
	for i := range 40 {
		r.publish(q, fmt.Sprintf(`{"n":%d}`, i))
	}
	r.eventually("all handled", func() bool { return a.count()+b.count() == 40 })
	if a.count() == 0 || b.count() == 0 {
		t.Errorf("one server took everything: %d / %d", a.count(), b.count())
	}
}
