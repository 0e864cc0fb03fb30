package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The latency scenario's pipelines, one per system: a publisher and a
// consumer on one queue, the consumer handing each body to the recorder.

func openAcemqPipe(ctx context.Context, e *env, sink func([]byte)) (*latencyPipe, error) {
	pt, err := rabbitmq.Dial(ctx, e.cfg.url,
		rabbitmq.WithInFlight(e.cfg.window), rabbitmq.WithPublishChannels(e.cfg.channels),
		rabbitmq.WithConnectionName("bench acemq publisher"))
	if err != nil {
		return nil, err
	}
	ct, err := rabbitmq.Dial(ctx, e.cfg.url, rabbitmq.WithConnectionName("bench acemq"))
	if err != nil {
		_ = pt.Close()
		return nil, err
	}
	mux := acemq.NewMux()
	mux.Use(defaultChain()...)
	mux.HandleFunc(e.queue, func(_ context.Context, msg *acemq.Message) ack.Ack {
		sink(msg.Body())
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: ct, Handler: mux, Prefetch: e.cfg.prefetch, Concurrency: e.cfg.workers}
	if err := ct.Declare(ctx, acemq.Topology(e.queue, srv.Retry, nil)); err != nil {
		_, _ = pt.Close(), ct.Close()
		return nil, err
	}
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(context.WithoutCancel(ctx)) }()
	pub := &acemq.Publisher{Transport: pt, Mandatory: true}
	return &latencyPipe{
		publish: func(ctx context.Context, body []byte) error {
			_, err := pub.Publish(ctx, acemq.Outgoing{RoutingKey: e.queue, Body: body, ContentType: "application/json"})
			return err
		},
		close: func(ctx context.Context) error {
			err := srv.Shutdown(ctx)
			if rerr := <-ran; err == nil {
				err = rerr
			}
			if cerr := ct.Close(); err == nil {
				err = cerr
			}
			if cerr := pt.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}, nil
}

func openRawPipe(ctx context.Context, e *env, sink func([]byte)) (*latencyPipe, error) {
	dial := func(name string) (*amqp.Connection, error) {
		return amqp.DialConfig(e.cfg.url, amqp.Config{Properties: amqp.Table{"connection_name": name}})
	}
	pc, err := dial("bench amqp091 publisher")
	if err != nil {
		return nil, err
	}
	cc, err := dial("bench amqp091")
	if err != nil {
		_ = pc.Close()
		return nil, err
	}
	fail := func(err error) (*latencyPipe, error) { _, _ = pc.Close(), cc.Close(); return nil, err }
	chans := make([]*amqp.Channel, e.cfg.channels)
	for i := range chans {
		if chans[i], err = pc.Channel(); err != nil {
			return fail(err)
		}
		if err := chans[i].Confirm(false); err != nil {
			return fail(err)
		}
	}
	ch, err := cc.Channel()
	if err != nil {
		return fail(err)
	}
	if err := ch.Qos(e.cfg.prefetch, 0, false); err != nil {
		return fail(err)
	}
	deliveries, err := ch.Consume(e.queue, "", false, false, false, false, nil)
	if err != nil {
		return fail(err)
	}
	consumed := make(chan error, 1)
	go func() { // one goroutine acking each delivery, as in the consume scenario
		for d := range deliveries {
			sink(d.Body)
			if err := d.Ack(false); err != nil {
				consumed <- err
				for range deliveries {
				}
				return
			}
		}
		consumed <- nil
	}()
	window := make(chan struct{}, e.cfg.window)
	var rr atomic.Uint64
	return &latencyPipe{
		publish: func(ctx context.Context, body []byte) error {
			// The headers and properties acemq writes, as in the publish scenario.
			id, now := newID(), time.Now()
			msg := amqp.Publishing{
				Headers: amqp.Table{
					acemq.HeaderID: id, acemq.HeaderAttempt: int64(1), acemq.HeaderCreated: now.UnixMilli(),
					acemq.HeaderExchange: "", acemq.HeaderRoutingKey: e.queue,
				},
				ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: id,
				Timestamp: now.Truncate(time.Second), Body: body,
			}
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
			defer func() { <-window }()
			dc, err := chans[rr.Add(1)%uint64(len(chans))].PublishWithDeferredConfirmWithContext(ctx, "", e.queue, true, false, msg)
			if err != nil {
				return err
			}
			ok, err := dc.WaitContext(ctx)
			if err == nil && !ok {
				err = errors.New("nacked")
			}
			return err
		},
		close: func(context.Context) error {
			err := ch.Close() // ends deliveries
			if cerr := <-consumed; err == nil {
				err = cerr
			}
			_, _ = cc.Close(), pc.Close()
			return err
		},
	}, nil
}

func openWatermillPipe(ctx context.Context, e *env, sink func([]byte)) (*latencyPipe, error) {
	c := watermillQueueConfig(e)
	c.Publish.ConfirmDelivery = true
	c.Publish.ChannelPoolSize = e.cfg.window
	c.Publish.Mandatory = true
	pub, err := wamqp.NewPublisher(c, watermill.NopLogger{})
	if err != nil {
		return nil, err
	}
	sub, err := wamqp.NewSubscriber(watermillQueueConfig(e), watermill.NopLogger{})
	if err != nil {
		_ = pub.Close()
		return nil, err
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		_, _ = pub.Close(), sub.Close()
		return nil, err
	}
	router.AddConsumerHandler("bench", e.queue, sub, func(msg *message.Message) error {
		sink(msg.Payload)
		return nil
	})
	ran := make(chan error, 1)
	go func() { ran <- router.Run(context.WithoutCancel(ctx)) }()
	select {
	case <-router.Running():
	case err := <-ran:
		_, _ = pub.Close(), sub.Close()
		return nil, fmt.Errorf("router: %w", err)
	}
	return &latencyPipe{
		publish: func(ctx context.Context, body []byte) error {
			msg := message.NewMessage(watermill.NewUUID(), body)
			msg.SetContext(ctx)
			return pub.Publish(e.queue, msg)
		},
		close: func(context.Context) error {
			err := router.Close()
			if rerr := <-ran; err == nil {
				err = rerr
			}
			if cerr := sub.Close(); err == nil {
				err = cerr
			}
			if cerr := pub.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}, nil
}
