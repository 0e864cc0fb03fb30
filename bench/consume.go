package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The consume scenario: a queue pre-filled with n messages (untimed),
// drained with prefetch cfg.prefetch and an ack per message. The clock
// runs from the start of the consumer (its declarations and basic.consume
// included) to the last message handled.

// stall is how long a run may make no progress before it fails.
const stall = 30 * time.Second

// acemqHeaders are the headers acemq's publisher writes.
func acemqHeaders(queue string) func(int) amqp.Table {
	return func(int) amqp.Table {
		return amqp.Table{
			acemq.HeaderID:         newID(),
			acemq.HeaderAttempt:    int64(1),
			acemq.HeaderCreated:    time.Now().UnixMilli(),
			acemq.HeaderExchange:   "",
			acemq.HeaderRoutingKey: queue,
		}
	}
}

// watermillHeaders are as many headers, all strings: watermill's default
// marshaler refuses any other type (and nacks the message, forever).
func watermillHeaders(queue string) func(int) amqp.Table {
	return func(int) amqp.Table {
		return amqp.Table{
			wamqp.DefaultMessageUUIDHeaderKey: watermill.NewUUID(),
			acemq.HeaderID:                    newID(),
			acemq.HeaderAttempt:               "1",
			acemq.HeaderCreated:               strconv.FormatInt(time.Now().UnixMilli(), 10),
			acemq.HeaderExchange:              "",
			acemq.HeaderRoutingKey:            queue,
		}
	}
}

// defaultChain is the middleware a service puts in front of its handlers.
func defaultChain() []acemq.Middleware {
	return []acemq.Middleware{middleware.Decode(codec.JSON), middleware.MaxAge(time.Hour), middleware.Recover(nil)}
}

func expectEmpty(e *env) error {
	if err := expectQueued(e, 0); err != nil {
		return fmt.Errorf("after the run: %w", err)
	}
	return nil
}

func consumeAcemq(ctx context.Context, e *env, m *meter) error {
	if err := e.admin.fill(ctx, e.queue, e.n, e.body, acemqHeaders(e.queue)); err != nil {
		return err
	}
	tr, err := rabbitmq.Dial(ctx, e.cfg.url, rabbitmq.WithConnectionName("bench acemq"))
	if err != nil {
		return err
	}
	defer tr.Close()
	done := newCounter(e.n)
	mux := acemq.NewMux()
	mux.Use(defaultChain()...)
	mux.HandleFunc(e.queue, func(context.Context, *acemq.Message) ack.Ack {
		done.inc()
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: tr, Handler: mux, Prefetch: e.cfg.prefetch, Concurrency: e.cfg.workers}
	if err := tr.Declare(ctx, acemq.Topology(e.queue, srv.Retry, nil)); err != nil {
		return err
	}
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

func consumeRaw(ctx context.Context, e *env, m *meter) error {
	if err := e.admin.fill(ctx, e.queue, e.n, e.body, acemqHeaders(e.queue)); err != nil {
		return err
	}
	conn, err := amqp.DialConfig(e.cfg.url, amqp.Config{Properties: amqp.Table{"connection_name": "bench amqp091"}})
	if err != nil {
		return err
	}
	defer conn.Close()
	m.start()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Qos(e.cfg.prefetch, 0, false); err != nil {
		return err
	}
	deliveries, err := ch.Consume(e.queue, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	timer := time.NewTimer(stall)
	defer timer.Stop()
	for i := range e.n {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("deliveries closed")
			}
			if err := d.Ack(false); err != nil {
				return err
			}
			timer.Reset(stall)
		case <-timer.C:
			return fmt.Errorf("stalled at %d of %d messages", i, e.n)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.stop()
	if err := ch.Close(); err != nil {
		return err
	}
	return expectEmpty(e)
}

func consumeWatermill(ctx context.Context, e *env, m *meter) error {
	if err := e.admin.fill(ctx, e.queue, e.n, e.body, watermillHeaders(e.queue)); err != nil {
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
	done := newCounter(e.n)
	router.AddConsumerHandler("bench", e.queue, sub, func(*message.Message) error {
		done.inc()
		return nil
	})
	if err := runRouter(ctx, e, m, router, done, nil); err != nil {
		return err
	}
	return expectEmpty(e)
}

// runRouter times a watermill router until the last message is counted.
// Without feed the clock starts with the router (subscribing included);
// with feed it starts once the router is running, and feed (publishing)
// is timed.
func runRouter(ctx context.Context, e *env, m *meter, router *message.Router, done *counter, feed func() error) error {
	ran := make(chan error, 1)
	if feed == nil {
		m.start()
	}
	go func() { ran <- router.Run(ctx) }()
	var err error
	if feed != nil {
		select {
		case <-router.Running():
		case err = <-ran:
			return fmt.Errorf("router: %w", err)
		}
		m.start()
		err = feed()
	}
	if err == nil {
		err = done.wait(ctx, stall)
	}
	m.stop()
	if cerr := router.Close(); err == nil {
		err = cerr
	}
	if rerr := <-ran; err == nil {
		err = rerr
	}
	return err
}
