package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The publish scenario: n confirmed, persistent, mandatory publishes from
// cfg.publishers goroutines with at most cfg.window awaiting a confirm.
// Every system first sends one message per confirm channel untimed, so
// that channels opened lazily are open before the clock starts.

// publishAll runs publish for indexes 0..n-1 from the given number of
// goroutines and returns the first error.
func publishAll(ctx context.Context, goroutines, n int, publish func(ctx context.Context, i int) error) error {
	var next atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := publish(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// expectQueued checks that the queue holds what was published: every
// system's publishes must really have landed.
func expectQueued(e *env, want int) error {
	got, err := e.admin.count(e.queue)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%d messages in %s, want %d", got, e.queue, want)
	}
	return nil
}

func publishAcemq(ctx context.Context, e *env, m *meter) error {
	tr, err := rabbitmq.Dial(ctx, e.cfg.url,
		rabbitmq.WithInFlight(e.cfg.window), rabbitmq.WithPublishChannels(e.cfg.channels),
		rabbitmq.WithConnectionName("bench acemq"))
	if err != nil {
		return err
	}
	defer tr.Close()
	if err := e.admin.declare(e.queue); err != nil {
		return err
	}
	p := &acemq.Publisher{Transport: tr, Mandatory: true}
	publish := func(ctx context.Context, _ int) error {
		_, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: e.queue, Body: e.body, ContentType: "application/json"})
		return err
	}
	for i := range e.cfg.channels { // opens every confirm channel
		if err := publish(ctx, i); err != nil {
			return err
		}
	}
	m.start()
	err = publishAll(ctx, e.cfg.publishers, e.n, publish)
	m.stop()
	if err != nil {
		return err
	}
	return expectQueued(e, e.n+e.cfg.channels)
}

func publishRaw(ctx context.Context, e *env, m *meter) error {
	conn, err := amqp.DialConfig(e.cfg.url, amqp.Config{Properties: amqp.Table{"connection_name": "bench amqp091"}})
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := e.admin.declare(e.queue); err != nil {
		return err
	}
	chans := make([]*amqp.Channel, e.cfg.channels)
	for i := range chans {
		if chans[i], err = conn.Channel(); err != nil {
			return err
		}
		if err := chans[i].Confirm(false); err != nil {
			return err
		}
	}
	window := make(chan struct{}, e.cfg.window)
	var rr atomic.Uint64
	// The same wire headers and properties acemq's publisher writes, so
	// that the ratio is the library's work and not fewer bytes.
	publish := func(ctx context.Context, _ int) error {
		id, now := newID(), time.Now()
		msg := amqp.Publishing{
			Headers: amqp.Table{
				acemq.HeaderID:         id,
				acemq.HeaderAttempt:    int64(1),
				acemq.HeaderCreated:    now.UnixMilli(),
				acemq.HeaderExchange:   "",
				acemq.HeaderRoutingKey: e.queue,
			},
			ContentType:  "application/json",
			DeliveryMode: amqp.Persistent,
			MessageId:    id,
			Timestamp:    now.Truncate(time.Second),
			Body:         e.body,
		}
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-window }()
		ch := chans[rr.Add(1)%uint64(len(chans))]
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", e.queue, true, false, msg)
		if err != nil {
			return err
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("nacked")
		}
		return nil
	}
	for i := range e.cfg.channels {
		if err := publish(ctx, i); err != nil {
			return err
		}
	}
	m.start()
	err = publishAll(ctx, e.cfg.publishers, e.n, publish)
	m.stop()
	if err != nil {
		return err
	}
	return expectQueued(e, e.n+e.cfg.channels)
}

// watermillQueueConfig is watermill-amqp's durable queue config: the
// default exchange, a durable queue named after the topic, persistent
// messages.
func watermillQueueConfig(e *env) wamqp.Config {
	c := wamqp.NewDurableQueueConfig(e.cfg.url)
	c.Consume.Qos.PrefetchCount = e.cfg.prefetch
	return c
}

func publishWatermill(ctx context.Context, e *env, m *meter) error {
	c := watermillQueueConfig(e)
	// A pooled channel has one publish awaiting its confirm, so the pool
	// size is the window.
	c.Publish.ConfirmDelivery = true
	c.Publish.ChannelPoolSize = e.cfg.window
	c.Publish.Mandatory = true
	pub, err := wamqp.NewPublisher(c, watermill.NopLogger{})
	if err != nil {
		return err
	}
	defer pub.Close()
	if err := e.admin.declare(e.queue); err != nil {
		return err
	}
	publish := func(ctx context.Context, _ int) error {
		msg := message.NewMessage(watermill.NewUUID(), e.body)
		msg.SetContext(ctx)
		return pub.Publish(e.queue, msg)
	}
	for i := range e.cfg.channels {
		if err := publish(ctx, i); err != nil {
			return err
		}
	}
	m.start()
	err = publishAll(ctx, e.cfg.publishers, e.n, publish)
	m.stop()
	if err != nil {
		return err
	}
	return expectQueued(e, e.n+e.cfg.channels)
}
