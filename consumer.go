package acemq

import (
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport"
)

// consumer is one queue being consumed: its workers take deliveries, run
// the handler, decide (decide.go) and settle (settle.go).
type consumer struct {
	e   *engine
	q   *queueRun
	sub transport.Subscription
}

// start runs the queue's workers, and one more goroutine that reports a
// subscription that ended without a stop asking for it.
func (c *consumer) start() {
	var alive sync.WaitGroup
	alive.Add(c.q.concurrency)
	for range c.q.concurrency {
		c.e.spawn(func() {
			defer alive.Done()
			c.work()
		})
	}
	c.e.spawn(func() {
		alive.Wait()
		if !isClosed(c.e.stop.requested) {
			c.e.failed <- fmt.Errorf("acemq: consumer of queue %s ended: %w", c.q.name, transport.ErrClosed)
		}
	})
}

// work handles deliveries until the subscription's channel closes or the
// stop cuts it off. Workers read the subscription directly: no hand-off on
// the hot path.
func (c *consumer) work() {
	c.each(func(d transport.Delivery) {
		if isClosed(c.e.stop.requested) {
			c.giveBack(d)
			return
		}
		c.handle(d)
	})
}

// giveBackUnstarted runs during the drain beside the workers, which may all
// be busy: a delivery not yet started goes straight back to the broker. It
// is the broker's to hand to another consumer, and holding it would make
// the drain as long as the queue.
func (c *consumer) giveBackUnstarted() { c.each(c.giveBack) }

// each calls f with every delivery until the subscription's channel closes
// or the stop cuts it off.
func (c *consumer) each(f func(transport.Delivery)) {
	deliveries := c.sub.Deliveries()
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return
			}
			f(d)
		case <-c.e.stop.cut:
			return
		}
	}
}

// handle runs the handler on one delivery, decides what its answer means
// and carries that out.
func (c *consumer) handle(d transport.Delivery) {
	m := newMessage(d, c.e.clock.Now)
	ctx := c.e.handlerCtx
	qm := c.q.metrics
	c.e.inst.inFlight.Add(ctx, 1, qm.queueAdd...)
	began := time.Now()
	a := c.serve(m)
	took := time.Since(began)
	c.e.inst.inFlight.Add(ctx, -1, qm.queueAdd...)
	if isClosed(c.e.stop.cut) {
		c.e.stop.cutHandlers.Add(1)
		c.e.log.Warn("acemq: shutdown deadline cut the handler off; the message goes back to the broker",
			zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()))
		c.giveBack(d) // the broker redelivers it
		return
	}
	o := min(int(a.Outcome()), len(qm.handled)-1)
	c.e.inst.handled.Add(ctx, 1, qm.handled[o]...)
	c.e.inst.duration.Record(ctx, took.Seconds(), qm.duration[o]...)
	c.settle(d, m, decide(c.q, m.env, a, c.e.clock.Now()))
}

// serve calls the handler, turning a panic into a failure that follows the
// retry policy. This is the one safety net for panics: one must never take
// the process, and with it every unsettled message of every queue, down.
func (c *consumer) serve(m *Message) (a ack.Ack) {
	defer func() {
		if r := recover(); r != nil {
			c.e.log.Error("acemq: handler panicked", zap.String("queue", c.q.name), zap.String("id", m.ID()),
				zap.Int("attempt", m.Attempt()), zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			a = ack.Retry(fmt.Errorf("acemq: handler panicked: %v", r))
		}
	}()
	return c.e.handler.ServeMessage(c.e.handlerCtx, m)
}
