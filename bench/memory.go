package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport/memory"
)

// The memory scenario: no broker. cfg.workers goroutines publish n
// messages while the consumer runs; the clock runs from the first publish
// to the last message handled. acemq publishes with its Publisher to its
// memory transport (wall clock) and consumes with a Server and the default
// chain; watermill publishes to a gochannel pub/sub consumed by a router
// with a no-op handler.

func memoryAcemq(ctx context.Context, e *env, m *meter) error {
	b := memory.New(memory.WithRealClock())
	defer b.Close()
	conn := b.Connect()
	defer conn.Close()
	done := newCounter(e.n)
	mux := acemq.NewMux()
	mux.Use(defaultChain()...)
	mux.HandleFunc(e.queue, func(context.Context, *acemq.Message) ack.Ack {
		done.inc()
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: conn, Handler: mux, Prefetch: e.cfg.prefetch, Concurrency: e.cfg.workers}
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()
	err := waitConsumer(ctx, conn, e.queue)
	if err == nil {
		p := &acemq.Publisher{Transport: conn, Mandatory: true}
		m.start()
		err = publishAll(ctx, e.cfg.workers, e.n, func(ctx context.Context, _ int) error {
			_, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: e.queue, Body: e.body, ContentType: "application/json"})
			return err
		})
		if err == nil {
			err = done.wait(ctx, stall)
		}
		m.stop()
	}
	if serr := srv.Shutdown(ctx); err == nil {
		err = serr
	}
	if rerr := <-ran; err == nil {
		err = rerr
	}
	return err
}

// waitConsumer waits until the server consumes queue.
func waitConsumer(ctx context.Context, conn *memory.Conn, queue string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := conn.Inspect(ctx, queue)
		if err == nil && info.Consumers > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no consumer on %s after 10s (%v)", queue, err)
		}
		time.Sleep(time.Millisecond)
	}
}

func memoryWatermill(ctx context.Context, e *env, m *meter) error {
	ps := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: int64(e.cfg.prefetch)}, watermill.NopLogger{})
	defer ps.Close()
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		return err
	}
	done := newCounter(e.n)
	router.AddConsumerHandler("bench", e.queue, ps, func(*message.Message) error {
		done.inc()
		return nil
	})
	return runRouter(ctx, e, m, router, done, func() error {
		return publishAll(ctx, e.cfg.workers, e.n, func(ctx context.Context, _ int) error {
			return ps.Publish(e.queue, message.NewMessage(watermill.NewUUID(), e.body))
		})
	})
}
