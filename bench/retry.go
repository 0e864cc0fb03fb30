package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	wmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The retry scenario: a pre-filled queue in which every other message
// fails on its first attempt and succeeds on its second, cfg.retryDelay
// later. acemq waits on a broker rung (the policy sends waits from half the
// delay to a rung); watermill's Retry middleware can only sleep in the
// handler. Both consume with cfg.workers handlers at a time. Besides
// msgs/s the run reports the consumer slots held while waiting: deliveries
// whose handler has failed, still unsettled and not being handled.

// failHeader marks the messages that fail once; a string, for watermill.
const failHeader = "bench-fail"

var errFailOnce = errors.New("bench: failing the first attempt")

func withFail(headers func(int) amqp.Table) func(int) amqp.Table {
	return func(i int) amqp.Table {
		h := headers(i)
		if i%2 == 0 {
			h[failHeader] = "1"
		}
		return h
	}
}

func retryPolicy(c config) retry.Policy {
	return retry.Fixed(2, c.retryDelay).WithBrokerWaitThreshold(c.retryDelay / 2)
}

func retryAcemq(ctx context.Context, e *env, m *meter) error {
	policy := retryPolicy(e.cfg)
	for _, d := range policy.BrokerRungs() {
		e.extra = append(e.extra, retry.RungName(e.queue, d))
	}
	if len(e.extra) == 0 {
		return errors.New("the policy has no broker rung")
	}
	if err := e.admin.fill(ctx, e.queue, e.n, e.body, withFail(acemqHeaders(e.queue))); err != nil {
		return err
	}
	tr, err := rabbitmq.Dial(ctx, e.cfg.url, rabbitmq.WithConnectionName("bench acemq"))
	if err != nil {
		return err
	}
	defer tr.Close()
	if err := tr.Declare(ctx, acemq.Topology(e.queue, policy, nil)); err != nil {
		return err
	}
	held := &heldTransport{Transport: tr, m: m}
	done := newCounter(e.n)
	mux := acemq.NewMux()
	mux.Use(defaultChain()...)
	mux.HandleFunc(e.queue, func(_ context.Context, msg *acemq.Message) ack.Ack {
		if msg.Header(failHeader) == "1" && msg.IsFirstAttempt() {
			held.failed(msg.ID())
			return ack.Retry(errFailOnce)
		}
		done.inc()
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: held, Handler: mux, Retry: policy, Prefetch: e.cfg.prefetch, Concurrency: e.cfg.workers}
	m.start()
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	err = done.wait(ctx, stall)
	m.stop()
	if serr := srv.Shutdown(ctx); err == nil {
		err = serr
	}
	if rerr := <-ran; err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	return expectEmpty(e)
}

// heldTransport wraps a transport to see when a failed delivery is
// settled: from the handler's failure to the ack (after the copy on the
// rung is confirmed) the delivery holds a consumer slot. The extra hop it
// adds per delivery is the same for every message and small beside the
// retry delay.
type heldTransport struct {
	transport.Transport
	m       *meter
	waiting sync.Map // message id → release
}

func (t *heldTransport) failed(id string) { t.waiting.Store(id, t.m.hold()) }

func (t *heldTransport) settled(id string) {
	if release, ok := t.waiting.LoadAndDelete(id); ok {
		release.(func())()
	}
}

func (t *heldTransport) Consume(ctx context.Context, queue string, opts transport.ConsumeOptions) (transport.Subscription, error) {
	sub, err := t.Transport.Consume(ctx, queue, opts)
	if err != nil {
		return nil, err
	}
	s := &heldSub{Subscription: sub, t: t, out: make(chan transport.Delivery), stop: make(chan struct{})}
	go s.forward()
	return s, nil
}

type heldSub struct {
	transport.Subscription
	t        *heldTransport
	out      chan transport.Delivery
	stop     chan struct{}
	stopOnce sync.Once
}

func (s *heldSub) Deliveries() <-chan transport.Delivery { return s.out }

func (s *heldSub) forward() {
	defer close(s.out)
	for d := range s.Subscription.Deliveries() {
		id, _ := d.Headers[acemq.HeaderID].(string)
		d.Acknowledger = &heldAck{inner: d.Acknowledger, id: id, t: s.t}
		select {
		case s.out <- d:
		case <-s.stop:
			_ = d.Reject(true)
		}
	}
}

func (s *heldSub) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	return s.Subscription.Close()
}

type heldAck struct {
	inner transport.Acknowledger
	id    string
	t     *heldTransport
}

func (a *heldAck) Ack() error {
	a.t.settled(a.id)
	return a.inner.Ack()
}

func (a *heldAck) Reject(requeue bool) error {
	a.t.settled(a.id)
	return a.inner.Reject(requeue)
}

func retryWatermill(ctx context.Context, e *env, m *meter) error {
	if err := e.admin.fill(ctx, e.queue, e.n, e.body, withFail(watermillHeaders(e.queue))); err != nil {
		return err
	}
	sub, err := wamqp.NewSubscriber(watermillQueueConfig(e), watermill.NopLogger{})
	if err != nil {
		return err
	}
	defer sub.Close()
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		return err
	}
	router.AddMiddleware(wmiddleware.Retry{
		MaxRetries:      1,
		InitialInterval: e.cfg.retryDelay,
		MaxInterval:     e.cfg.retryDelay,
		Multiplier:      1,
	}.Middleware)
	done := newCounter(e.n)
	var waiting sync.Map // message uuid → release
	handler := func(msg *message.Message) error {
		if msg.Metadata.Get(failHeader) == "1" {
			if release, ok := waiting.LoadAndDelete(msg.UUID); ok {
				release.(func())() // the retry starts: the wait is over
			} else {
				waiting.Store(msg.UUID, m.hold())
				return errFailOnce
			}
		}
		done.inc()
		return nil
	}
	// One subscription handles one message at a time: as many handlers as
	// acemq has workers.
	for i := range e.cfg.workers {
		router.AddConsumerHandler(fmt.Sprintf("bench-%d", i), e.queue, sub, handler)
	}
	if err := runRouter(ctx, e, m, router, done, nil); err != nil {
		return err
	}
	return expectEmpty(e)
}
