package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/backoff"
	"github.com/acemq/acemq/transport"
)

// start runs the queue's workers on its subscription, and its supervisor.
func (c *consumer) start() {
	sub := c.subscription()
	alive := c.startWorkers(sub)
	c.e.spawn(func() { c.supervise(sub, alive) })
}

// startWorkers runs the queue's workers on sub; alive ends when they have.
func (c *consumer) startWorkers(sub transport.Subscription) *sync.WaitGroup {
	return c.startWorkersN(sub, c.q.concurrency)
}

// startWorkersN runs n workers on sub.
func (c *consumer) startWorkersN(sub transport.Subscription, n int) *sync.WaitGroup {
	alive := new(sync.WaitGroup)
	alive.Add(n)
	workers := make([]*worker, n)
	c.mu.Lock()
	l := c.lease
	c.mu.Unlock()
	for i := range workers {
		w := newWorker(c.e.handlerCtx, [2]*sync.WaitGroup{&c.e.running, alive})
		w.lease = l
		workers[i] = w
		c.e.running.Add(1)
		go func() {
			defer w.done()
			c.work(w, sub)
		}()
	}
	c.mu.Lock()
	c.workers = workers
	c.mu.Unlock()
	return alive
}

// supervise waits for the workers of sub to end. Ended by a stop, that is
// all. Ended by the broker, unasked: a queue deleted under the server (the
// broker cancelled the consumer, or the queue is not found) is declared
// again and consumed again with backoff, where the server may declare; a
// refusal for now (transport.ErrRefused: a connection limit, a vhost
// down), which our transports wait out themselves without ending the
// subscription, is consumed again with backoff all the same; anything
// else (permissions revoked, the vhost deleted, the transport closed)
// stops Run with the broker's reason.
func (c *consumer) supervise(sub transport.Subscription, alive *sync.WaitGroup) {
	for {
		declared := c.awaitWorkers(sub, alive) // rejoin.go
		if isClosed(c.e.stop.requested) {
			return
		}
		if c.switched() { // the breaker cancelled it (breaker.go)
			next, workers, err := c.resume()
			switch {
			case err != nil:
				c.e.fail(fmt.Errorf("acemq: consumer of queue %s: consuming it again after its breaker was refused: %w", c.q.name, err))
				return
			case next == nil:
				return // stopping
			}
			sub, alive = next, workers
			continue
		}
		err := sub.Err()
		if err == nil {
			err = transport.ErrClosed
		}
		refused := errors.Is(err, transport.ErrRefused)
		if !refused && (!c.q.declare || !(errors.Is(err, transport.ErrCancelled) || errors.Is(err, transport.ErrNotFound))) {
			c.e.fail(fmt.Errorf("acemq: consumer of queue %s ended: %w", c.q.name, err))
			return
		}
		c.consuming.Store(false)
		switch {
		case refused:
			c.e.noteRefusal(c.q.name, err)
		case declared:
			c.e.log.Info("acemq: the queue's handlers returned; consuming it again", zap.String("queue", c.q.name))
		default:
			c.e.log.Error("acemq: the broker ended the consumer; declaring the queue again and consuming it again",
				zap.String("queue", c.q.name), zap.Error(err))
		}
		next, err := c.resubscribe()
		if err != nil {
			c.e.fail(fmt.Errorf("acemq: consumer of queue %s ended, and consuming it again was refused: %w", c.q.name, err))
			return
		}
		if next == nil {
			return // stopping
		}
		sub = next
		alive = c.startWorkers(sub)
		c.consuming.Store(true)
	}
}

// resubscribeBackoff spaces the tries to declare and consume a queue
// deleted under the server.
var resubscribeBackoff = backoff.Policy{Min: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: true}

// resubscribe declares the queue's topology and consumes it again, with
// backoff, until it works, a stop is requested (then nil, nil), or the
// broker refuses for good: access refused or withdrawn, the vhost gone, an
// inequivalent declaration (then the broker's reason).
func (c *consumer) resubscribe() (transport.Subscription, error) {
	return c.consumeAgain(true, "consume a deleted queue again", c.declareAndConsume)
}

// consumeAgain consumes the queue again through consume, with backoff
// (before the first try too when waitFirst), until it works, a stop is
// requested (nil, nil) or the broker refuses for good (its reason). The
// new subscription is the consumer's; the one before it is retired, and
// closes once what it holds is settled. what names the tries in the log.
func (c *consumer) consumeAgain(waitFirst bool, what string, consume func(context.Context) (transport.Subscription, error)) (transport.Subscription, error) {
	for n := 0; ; n++ {
		if n > 0 || waitFirst {
			if backoff.Sleep(context.Background(), nil, resubscribeBackoff.Delay(n), c.e.stop.requested) != nil {
				return nil, nil
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.e.publishTimeout)
		sub, err := consume(ctx)
		cancel()
		switch {
		case errors.Is(err, transport.ErrAccessRefused), errors.Is(err, transport.ErrNotFound), errors.Is(err, transport.ErrPreconditionFailed):
			return nil, err
		case errors.Is(err, transport.ErrRefused):
			continue // counted and logged at a bounded rate by consumeRefusable
		case err != nil:
			c.e.log.Warn("acemq: "+what, zap.String("queue", c.q.name), zap.Int("tries", n+1), zap.Error(err))
			continue
		}
		c.mu.Lock()
		if isClosed(c.e.stop.requested) { // the drain may have read the old one
			c.mu.Unlock()
			_ = sub.Close()
			return nil, nil
		}
		c.switching = nil // a breaker's switch, if any, is carried out
		c.mu.Unlock()
		c.consumeOn(sub)
		c.e.log.Info("acemq: consuming the queue again", zap.String("queue", c.q.name), zap.Int("tries", n+1))
		return sub, nil
	}
}

// declareAndConsume declares the queue's topology where the server may
// (a consumer refused for now is consumed again with declare off too),
// and consumes it.
func (c *consumer) declareAndConsume(ctx context.Context) (transport.Subscription, error) {
	if c.q.declare {
		if err := c.e.declare(ctx, c.q); err != nil {
			return nil, err
		}
	}
	return c.e.consume(ctx, c.q)
}

// subscription is the queue's current subscription.
func (c *consumer) subscription() transport.Subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sub
}
