package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// TestMissingRungWaitsInProcess: a rung deleted under a running consumer
// degrades to an in-process wait, counted with the rung's name and logged
// with the fix.
func TestMissingRungWaitsInProcess(t *testing.T) {
	t.Parallel()
	h := &recorder{answer: func(m *acemq.Message) ack.Ack {
		if m.Attempt() == 1 {
			return ack.Retry(errBoom)
		}
		return ack.Accept()
	}}
	f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Minute)}, map[string]acemq.Handler{"q": h})
	if !f.broker.DeleteQueue("q.retry.1m") {
		t.Fatal("the rung was not declared at start-up")
	}
	f.publish("q", "{}", nil)
	f.eventually("attempt 1", func() bool { return h.count() == 1 })
	f.advance(1, time.Minute)
	f.eventually("attempt 2, accepted", func() bool { return h.count() == 2 && f.broker.Unacked("q") == 0 })
	f.counterReaches(acemq.MetricRungMissing, map[string]string{"rung": "q.retry.1m"}, 1)
	if _, ok := f.broker.Queue("q.retry.1m"); !ok {
		t.Error("the server, allowed to declare, did not declare the rung again")
	}
	logs := f.logs.FilterMessageSnippet("rung queue is missing").All()
	if len(logs) != 1 || logs[0].ContextMap()["queue"] != "q" || !strings.Contains(logs[0].Message, "acemq.Topology") {
		t.Errorf("missing-rung log %v", logs)
	}
}

// TestDeadLetterQueueMissing: the copy reaches no queue, so the original is
// rejected to the broker (its own dead-lettering is the last resort) and
// set.aside.failed is counted. Never acked.
func TestDeadLetterQueueMissing(t *testing.T) {
	t.Parallel()
	broker := memory.New()
	// The source queue has its own dead-letter exchange: the last resort.
	pre := broker.Connect()
	err := pre.Declare(context.Background(), transport.Topology{
		Exchanges: []transport.Exchange{{Name: "last.resort", Kind: "fanout", Durable: true}},
		Queues: []transport.Queue{
			{Name: "q", Durable: true, Args: map[string]any{"x-dead-letter-exchange": "last.resort"}},
			{Name: "graveyard", Durable: true},
		},
		Bindings: []transport.Binding{{Queue: "graveyard", Exchange: "last.resort"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	pre.Close()
	f := startOn(t, broker, &acemq.Server{Queues: map[string]acemq.QueueConfig{"q": {Args: map[string]any{"x-dead-letter-exchange": "last.resort"}}}},
		map[string]acemq.Handler{"q": always(ack.DeadLetter(errors.New("no such customer")))})
	broker.DeleteQueue("q.dlq")
	f.publish("q", "{}", nil)
	d := f.only("graveyard")
	if _, ok := d.Headers["x-death"]; !ok {
		t.Errorf("the broker's dead-lettering did not take it: %v", d.Headers)
	}
	f.counterReaches(acemq.MetricSetAsideFailed, map[string]string{"queue": "q", "destination": "q.dlq"}, 1)
	if f.counter(acemq.MetricDeadLettered, nil) != 0 {
		t.Error("counted as dead-lettered although the copy reached no queue")
	}
}

// refusingTransport answers publishes to one queue with refuse's error
// instead of publishing them, while refuse returns one: a broker that
// nacks, loses confirms or blocks publishes.
type refusingTransport struct {
	*memory.Conn
	queue   string
	refuse  func() error
	refused atomic.Int64
}

func (r *refusingTransport) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	if p.RoutingKey == r.queue {
		if err := r.refuse(); err != nil {
			r.refused.Add(1)
			return transport.Confirmation{}, err
		}
	}
	return r.Conn.Publish(ctx, p)
}

// TestRepublishNackedThenTaken: a nack is tried again, held off the
// worker, and the copy that gets through settles the original as usual.
func TestRepublishNackedThenTaken(t *testing.T) {
	t.Parallel()
	broker, conn := bare(t)
	var nacks atomic.Int32
	nacks.Store(3) // a quorum queue electing a leader
	tr := &refusingTransport{Conn: conn, queue: "q.dlq", refuse: func() error {
		if nacks.Add(-1) >= 0 {
			return transport.ErrNacked
		}
		return nil
	}}
	h := &recorder{answer: func(m *acemq.Message) ack.Ack {
		if string(m.Body()) == `{"fail":true}` {
			return ack.DeadLetter(errors.New("no"))
		}
		return ack.Accept()
	}}
	f := startOn(t, broker, &acemq.Server{Transport: tr, Concurrency: 1}, map[string]acemq.Handler{"q": h})
	f.publish("q", `{"fail":true}`, nil)
	// The only worker is free while the copy is held: the next message
	// is handled meanwhile.
	f.publish("q", "{}", nil)
	f.eventually("the next message handled", func() bool { return h.count() == 2 })
	d := f.only("q.dlq")
	if got := d.Headers[acemq.HeaderError]; got != "the handler rejected it: no" {
		t.Errorf("dead letter reason %v", got)
	}
	f.eventually("the original acked", func() bool { return broker.Unacked("q") == 0 && broker.Depth("q") == 0 })
	if got := f.counter(acemq.MetricSetAsideFailed, nil); got != 0 {
		t.Errorf("set.aside.failed = %d, want 0", got)
	}
	f.counterReaches(acemq.MetricDeadLettered, nil, 1)
}

// TestRepublishNotConfirmed: an unknown outcome gives the original back
// (a duplicate, never a loss). A nack on every try holds it instead
// (TestExecutorConclusions).
func TestRepublishNotConfirmed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err          error
		requeued     bool
		setAsideFail int64
	}{
		{transport.ErrUnconfirmed, true, 0},
		{context.DeadlineExceeded, true, 0},
	} {
		t.Run(tt.err.Error(), func(t *testing.T) {
			t.Parallel()
			broker, conn := bare(t)
			h := &recorder{answer: func(m *acemq.Message) ack.Ack {
				if m.Envelope().Redelivered {
					return ack.Accept()
				}
				return ack.DeadLetter(errors.New("no"))
			}}
			f := startOn(t, broker, &acemq.Server{Transport: &refusingTransport{Conn: conn, queue: "q.dlq", refuse: func() error { return tt.err }}}, map[string]acemq.Handler{"q": h})
			f.publish("q", "{}", nil)
			if tt.requeued {
				f.eventually("redelivered and accepted", func() bool { return h.count() == 2 && broker.Unacked("q") == 0 })
			} else {
				f.eventually("rejected", func() bool { return h.count() == 1 && broker.Unacked("q") == 0 && broker.Depth("q") == 0 })
			}
			if got := f.counter(acemq.MetricSetAsideFailed, nil); got != tt.setAsideFail {
				t.Errorf("set.aside.failed = %d, want %d", got, tt.setAsideFail)
			}
		})
	}
}

func TestDeclareRefusedStopsRun(t *testing.T) {
	t.Parallel()
	_, conn := bare(t)
	// Someone declared the rung with another TTL.
	if err := conn.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: "q.retry.1m", Durable: true, Args: map[string]any{"x-message-ttl": int64(1)}}}}); err != nil {
		t.Fatal(err)
	}
	srv := &acemq.Server{Transport: conn, Handler: acceptMux("q"), Retry: retry.Fixed(2, time.Minute)}
	err := srv.Run(context.Background())
	if !errors.Is(err, transport.ErrPreconditionFailed) || !strings.Contains(err.Error(), "declare topology of queue q") {
		t.Errorf("Run = %v, want a refused declaration", err)
	}
	// The refusal killed nothing else: the same connection still works.
	if _, err := conn.Publish(context.Background(), transport.Publishing{RoutingKey: "q.retry.1m", Body: []byte("x")}); err != nil {
		t.Errorf("publish after the refusal: %v", err)
	}
}

func TestNoDeclare(t *testing.T) {
	t.Parallel()
	broker, conn := bare(t)
	srv := &acemq.Server{Transport: conn, Handler: acceptMux("q"), NoDeclare: true}
	if err := srv.Run(context.Background()); !errors.Is(err, transport.ErrNotFound) {
		t.Errorf("Run with declare off on a missing queue = %v, want not found", err)
	}
	if _, ok := broker.Queue("q.dlq"); ok {
		t.Error("declare off declared the dead-letter queue")
	}
}

// TestNoDeclareRetriesInProcess: with declare off nothing publishes to a
// rung; the wait is held in the process and dead letters go to the
// pre-declared queue.
func TestNoDeclareRetriesInProcess(t *testing.T) {
	t.Parallel()
	broker := memory.New()
	pre := broker.Connect()
	if err := pre.Declare(context.Background(), acemq.Topology("q", retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	pre.Close()
	h := always(ack.Retry(errBoom))
	f := startOn(t, broker, &acemq.Server{NoDeclare: true, Retry: retry.Fixed(2, time.Minute)}, map[string]acemq.Handler{"q": h})
	if _, ok := broker.Queue("q.retry.1m"); ok {
		t.Fatal("declare off declared a rung")
	}
	f.publish("q", "{}", nil)
	f.eventually("attempt 1", func() bool { return h.count() == 1 })
	f.advance(1, time.Minute)
	if d := f.only("q.dlq"); d.Headers["x-acemq-error"] != "exhausted 2 attempts: the warehouse is not answering" {
		t.Errorf("reason %v", d.Headers["x-acemq-error"])
	}
	if f.counter(acemq.MetricRungMissing, nil) != 0 {
		t.Error("declare off is not a missing rung")
	}
}

func TestTopologyDeclaresTheContract(t *testing.T) {
	t.Parallel()
	f := start(t, &acemq.Server{Retry: retry.Exponential(4, 20*time.Second, 0)}, map[string]acemq.Handler{"orders": always(ack.Accept())})
	for _, q := range []string{"orders", "orders.dlq", "orders.parked", "orders.retry.40s", "orders.retry.1m20s"} {
		if d, ok := f.broker.Queue(q); !ok || !d.Durable {
			t.Errorf("queue %s: %+v, %v", q, d, ok)
		}
	}
	if _, ok := f.broker.Queue("orders.retry.20s"); ok {
		t.Error("a wait under the threshold got a rung")
	}
	for _, x := range []string{"acemq.retry", "acemq.dlx"} {
		if d, ok := f.broker.Exchange(x); !ok || d.Kind != "direct" || !d.Durable {
			t.Errorf("exchange %s: %+v", x, d)
		}
	}
	found := false
	for _, b := range f.broker.Bindings("orders") {
		found = found || (b == transport.Binding{Queue: "orders", Exchange: "acemq.retry", Key: "orders"})
	}
	if !found {
		t.Errorf("no orders → acemq.retry binding: %v", f.broker.Bindings("orders"))
	}
}

func TestPublisher(t *testing.T) {
	t.Parallel()
	broker, conn := bare(t)
	ctx := context.Background()
	if err := conn.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: "q", Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	loose := &acemq.Publisher{Transport: conn}
	res, err := loose.Publish(ctx, acemq.Outgoing{RoutingKey: "nowhere", Body: []byte("x")})
	if err != nil || !res.Confirmed || res.Routed {
		t.Errorf("unroutable without mandatory: %+v, %v", res, err)
	}
	strict := &acemq.Publisher{Transport: conn, Mandatory: true}
	_, err = strict.Publish(ctx, acemq.Outgoing{RoutingKey: "nowhere", Body: []byte("x")})
	var pe *acemq.PublishError
	if !errors.Is(err, acemq.ErrUnroutable) || !errors.As(err, &pe) || !pe.Unroutable || pe.RoutingKey != "nowhere" {
		t.Errorf("unroutable with mandatory: %v", err)
	}
	res, err = strict.Publish(ctx, acemq.Outgoing{RoutingKey: "q", Body: []byte("x"), ID: "fixed-id", CorrelationID: "c"})
	if err != nil || !res.Routed || res.ID != "fixed-id" {
		t.Fatalf("routed: %+v, %v", res, err)
	}
	d := broker.Peek("q")[0]
	env := acemq.EnvelopeOf(d)
	if env.ID != "fixed-id" || env.Attempt != 1 || !env.CreatedAt.Equal(memory.Epoch) || d.DeliveryMode != 2 || d.CorrelationID != "c" {
		t.Errorf("published %+v / %+v", env, d.Properties)
	}
	_, err = strict.Publish(ctx, acemq.Outgoing{Exchange: "no.such.exchange", RoutingKey: "q"})
	if !errors.Is(err, transport.ErrNotFound) {
		t.Errorf("publish to a missing exchange: %v", err)
	}
}

func TestCompetingServers(t *testing.T) {
	t.Parallel()
	broker := memory.New()
	a, b := always(ack.Accept()), always(ack.Accept())
	fa := startOn(t, broker, &acemq.Server{Concurrency: 1, Prefetch: 1}, map[string]acemq.Handler{"q": a})
	startOn(t, broker, &acemq.Server{Concurrency: 1, Prefetch: 1}, map[string]acemq.Handler{"q": b})
	fa.eventually("two consumers", func() bool {
		info, err := fa.conn.Inspect(context.Background(), "q")
		return err == nil && info.Consumers == 2
	})
	for range 20 {
		fa.publish("q", "{}", nil)
	}
	fa.eventually("all handled", func() bool { return a.count()+b.count() == 20 })
	if a.count() == 0 || b.count() == 0 {
		t.Errorf("one server took everything: %d / %d", a.count(), b.count())
	}
}

// TestBlockedBrokerHoldsTheMessage: a dead letter whose publish the broker
// blocks is held until the alarm clears, not given back into a hot loop.
func TestBlockedBrokerHoldsTheMessage(t *testing.T) {
	t.Parallel()
	broker, conn := bare(t)
	var blocked atomic.Bool
	blocked.Store(true)
	bt := &refusingTransport{Conn: conn, queue: "q.dlq", refuse: func() error {
		if blocked.Load() {
			return fmt.Errorf("acemq: publish: %w", transport.ErrBlocked)
		}
		return nil
	}}
	h := &recorder{answer: func(m *acemq.Message) ack.Ack {
		if string(m.Body()) == "ok" {
			return ack.Accept()
		}
		return ack.DeadLetter(errors.New("no such customer"))
	}}
	f := startOn(t, broker, &acemq.Server{Transport: bt, Concurrency: 1}, map[string]acemq.Handler{"q": h})
	f.publish("q", "{}", nil)
	f.eventually("several refused publishes", func() bool { return bt.refused.Load() >= 3 })
	// The held message does not hold the only worker: others go on.
	f.publish("q", "ok", nil)
	f.eventually("the next message handled meanwhile", func() bool { return h.count() == 2 })
	// The handler has returned; its ack follows. Only the held one stays.
	f.eventually("the next message acked, the held one not", func() bool { return f.broker.Unacked("q") == 1 })
	blocked.Store(false)
	f.only("q.dlq")
	f.eventually("original acked", func() bool { return f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
	if h.count() != 2 {
		t.Errorf("handled %d times: the held message went round again", h.count())
	}
}

// TestWorkQueueDeletedUnderTheServer: the broker cancels the consumer of a
// queue deleted under a running server; one allowed to declare declares it
// again, consumes it again, and handles what is published to it next. One
// that may not declare stops Run with the broker's reason.
func TestWorkQueueDeletedUnderTheServer(t *testing.T) {
	t.Parallel()
	h := always(ack.Accept())
	f := start(t, &acemq.Server{}, map[string]acemq.Handler{"q": h})
	if !f.broker.DeleteQueue("q") {
		t.Fatal("no queue to delete")
	}
	f.eventually("q declared and consumed again", func() bool {
		info, err := f.conn.Inspect(context.Background(), "q")
		return err == nil && info.Consumers == 1
	})
	f.publish("q", "{}", nil)
	f.eventually("handled", func() bool { return h.count() == 1 && f.broker.Unacked("q") == 0 })
	if logs := f.logs.FilterMessageSnippet("the broker ended the consumer").All(); len(logs) != 1 || !strings.Contains(fmt.Sprint(logs[0].ContextMap()["error"]), "cancelled") {
		t.Errorf("log %v", logs)
	}

	broker, conn := bare(t)
	if err := conn.Declare(context.Background(), acemq.Topology("q", retry.Policy{}, nil)); err != nil {
		t.Fatal(err)
	}
	srv := &acemq.Server{Transport: conn, Handler: acceptMux("q"), NoDeclare: true}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(context.Background()) }()
	<-srv.Ready()
	broker.DeleteQueue("q")
	select {
	case err := <-runErr:
		if !errors.Is(err, transport.ErrCancelled) {
			t.Errorf("Run = %v, want the broker's cancel", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
}
