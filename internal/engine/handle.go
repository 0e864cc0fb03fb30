package engine

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/internal/panicked"
	"github.com/acemq/acemq/transport"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// work handles deliveries until the subscription's channel closes, the
// stop cuts it off, or the stop took over the delivery of a handler that
// did not return by the deadline. Workers read the subscription directly:
// no hand-off on the hot path.
func (c *consumer) work(w *worker, sub transport.Subscription) {
	c.e.overdue.serve(c) // before any delivery: the broker's reports reach the workers
	c.each(sub, func(d transport.Delivery) bool {
		c.holding.Add(1)
		c.moves.Add(1)
		defer func() { c.holding.Add(-1); c.moves.Add(1) }()
		w.lease.take()
		if isClosed(c.e.stop.requested) {
			// Given back while the consumer is still subscribed, it would
			// come straight back to it, round and round until the cancel:
			// a loop that spends a quorum queue's delivery budget (every
			// return counts before RabbitMQ 4.3). So it waits for the
			// cancel; prefetch bounds what waits so.
			<-c.e.stop.cancelled
			c.end(d, message{}, unstartedOn(w.lease))
			return true
		}
		permit, ok := c.allow(w, d)
		if !ok {
			return true // its breaker holds the queue: given back, to wait in the broker
		}
		if len(c.q.throttles) == 0 {
			return c.handle(w, d, permit, nil)
		}
		admitted := c.admit()
		c.moves.Add(1)
		if !admitted { // a stop came first; given back as above
			c.report(permit, ack.Ack{}, false)
			<-c.e.stop.cancelled
			c.end(d, message{}, unstartedOn(w.lease))
			return true
		}
		// The slots go back as the handler returns, before its settlement:
		// the group caps handlers, and a slot held while the settlement
		// publishes a copy would keep the next handler of the group waiting
		// for the broker. (Handed on before the ack, it also never looks
		// free to a test on a virtual clock while a delivery waits.)
		released := false
		release := func() {
			if !released {
				released = true
				c.release()
			}
		}
		defer release()
		return c.handle(w, d, permit, release)
	})
}

// giveBackUnstarted runs during the drain beside the workers, which may all
// be busy: a delivery not yet started goes straight back to the broker. It
// is the broker's to hand to another consumer, and holding it would make
// the drain as long as the queue.
func (c *consumer) giveBackUnstarted() {
	c.each(c.subscription(), func(d transport.Delivery) bool { c.end(d, message{}, unstarted); return true })
}

// each calls f with every delivery until the subscription's channel
// closes, the stop cuts it off, or f says to stop.
func (c *consumer) each(sub transport.Subscription, f func(transport.Delivery) bool) {
	deliveries := sub.Deliveries()
	for {
		select {
		case d, ok := <-deliveries:
			if !ok || !f(d) {
				return
			}
		case <-c.e.stop.cut:
			return
		}
	}
}

// handle runs the handler on one delivery, decides what its answer means
// and carries that out. It reports false when the stop took the delivery
// over while the handler ran (cutOff): the answer comes too late to count,
// and the worker is no longer the engine's. A redelivery is first looked
// at (redelivery): it may be overdue, or its message still running here.
// handlerDone, if not nil, is called as the handler returns.
func (c *consumer) handle(w *worker, d transport.Delivery, p flow.Permit, handlerDone func()) bool {
	user, env := c.e.cfg.Receive(d, c.e.now)
	m := message{user: user, env: env}
	pctx, span := c.startProcess(d, m)
	if d.Redelivered && c.redelivery(w, d, m, pctx) {
		c.report(p, ack.Ack{}, false)
		return true
	}
	ctx := c.e.handlerCtx
	qm := c.q.metrics
	c.e.inst.inFlight.Add(ctx, 1, qm.queueAdd...)
	began := time.Now()
	hctx := w.begin(d, m, began, c.handlerTimeout())
	if span.SpanContext().IsValid() { // the handler's own spans are children of it
		hctx = trace.ContextWithSpan(hctx, span)
	}
	a := c.serve(hctx, m)
	took := time.Since(began)
	if handlerDone != nil {
		handlerDone()
	}
	c.e.inst.inFlight.Add(ctx, -1, qm.queueAdd...)
	answered(span, a)
	s := settling{ctx: pctx, took: took, ran: true, began: began, lease: w.lease}
	owned, takenBack := w.end()
	c.report(p, a, owned && !takenBack && !isClosed(c.e.stop.cut))
	switch {
	case !owned:
		c.e.log.Warn("acemq: a handler cut off by the shutdown deadline returned; its answer is discarded, as its message went back to the broker at the deadline",
			zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.String("answer", a.String()), zap.Stringer("took", took))
		s.lease = nil // the stop's cutOff gave it back and told the lease
		c.end(d, m, s.instead(settleDrop))
		return false
	case isClosed(c.e.stop.cut): // it returned as the deadline cancelled it
		c.e.stop.cutHandlers.Add(1)
		c.logCut(m)
		c.end(d, m, s.instead(settleGiveBack)) // the broker redelivers it
	case takenBack: // nothing to settle: the broker has it again
		c.e.log.Warn("acemq: a handler returned after the broker took its delivery back (its consumer_timeout closed the channel); its answer is discarded, as the broker delivers the message again",
			zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.String("answer", a.String()), zap.Stringer("took", took))
		c.end(d, m, s.instead(settleDrop))
	default:
		s.verdict = decide(c.q, *m.env, a, c.judgedFor(m, a))
		c.settle(d, m, s)
	}
	return true
}

// cutOff gives back, at the deadline, the delivery of every handler still
// running, so that another instance takes it now rather than when (or if)
// the handler returns. The worker is then abandoned: the stop counts it as
// ended, and its goroutine ends on its own once the handler returns, with
// its answer discarded. It reports how many it cut off.
func (c *consumer) cutOff() int {
	workers := c.workersNow()
	n := 0
	for _, w := range workers {
		if d, m, ok := w.takeOver(); ok {
			n++
			c.logCut(m)
			c.end(d, message{}, unstartedOn(w.lease)) // the broker redelivers it; the handler's return reports it
		}
	}
	return n
}

func (c *consumer) logCut(m message) {
	c.e.log.Warn("acemq: shutdown deadline cut the handler off; the message goes back to the broker",
		zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()))
}

// serve calls the handler, turning a panic into a failure that follows the
// retry policy. This is the one safety net for panics: one must never take
// the process, and with it every unsettled message of every queue, down.
func (c *consumer) serve(ctx context.Context, m message) (a ack.Ack) {
	defer func() {
		if r := recover(); r != nil {
			c.e.log.Error("acemq: handler panicked", zap.String("queue", c.q.name), zap.String("id", m.ID()),
				zap.Int("attempt", m.Attempt()), zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			a = panicked.Retry(r)
		}
	}()
	return c.e.cfg.Serve(ctx, m.user)
}
