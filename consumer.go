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
	e       *engine
	q       *queueRun
	sub     transport.Subscription
	workers []*worker
}

// start runs the queue's workers, and one more goroutine that reports a
// subscription that ended without a stop asking for it.
func (c *consumer) start() {
	var alive sync.WaitGroup
	alive.Add(c.q.concurrency)
	c.workers = make([]*worker, c.q.concurrency)
	for i := range c.workers {
		w := &worker{groups: [2]*sync.WaitGroup{&c.e.running, &alive}}
		c.workers[i] = w
		c.e.running.Add(1)
		go func() {
			defer w.done()
			c.work(w)
		}()
	}
	c.e.spawn(func() {
		alive.Wait()
		if !isClosed(c.e.stop.requested) {
			c.e.failed <- fmt.Errorf("acemq: consumer of queue %s ended: %w", c.q.name, transport.ErrClosed)
		}
	})
}

// work handles deliveries until the subscription's channel closes, the
// stop cuts it off, or the stop took over the delivery of a handler that
// did not return by the deadline. Workers read the subscription directly:
// no hand-off on the hot path.
func (c *consumer) work(w *worker) {
	deliveries := c.sub.Deliveries()
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return
			}
			if isClosed(c.e.stop.requested) {
				c.giveBack(d)
				continue
			}
			if !c.handle(w, d) {
				return
			}
		case <-c.e.stop.cut:
			return
		}
	}
}

// worker is one of a consumer's goroutines: what it is handling, and
// whether the stop has taken that over.
type worker struct {
	groups [2]*sync.WaitGroup // the engine's running, and the consumer's alive

	mu        sync.Mutex
	d         transport.Delivery
	m         *Message
	busy      bool // a handler is running on d
	abandoned bool // the stop gave d back and counted the worker as ended
}

func (w *worker) begin(d transport.Delivery, m *Message) {
	w.mu.Lock()
	w.d, w.m, w.busy = d, m, true
	w.mu.Unlock()
}

// end reports whether the worker still owns its delivery now that the
// handler has returned.
func (w *worker) end() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy = false
	w.d, w.m = transport.Delivery{}, nil
	return !w.abandoned
}

// takeOver takes the delivery of a running handler away from the worker,
// and marks the worker ended on its behalf.
func (w *worker) takeOver() (transport.Delivery, *Message, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.busy || w.abandoned {
		return transport.Delivery{}, nil, false
	}
	w.abandoned = true
	w.groups[0].Done()
	w.groups[1].Done()
	return w.d, w.m, true
}

// done marks the worker's goroutine ended, unless the stop did so already
// when it took the worker's delivery over.
func (w *worker) done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.abandoned {
		w.groups[0].Done()
		w.groups[1].Done()
	}
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
// and carries that out. It reports false when the stop took the delivery
// over while the handler ran (cutOff): the answer comes too late to count,
// and the worker is no longer the engine's.
func (c *consumer) handle(w *worker, d transport.Delivery) bool {
	m := newMessage(d, c.e.clock.Now)
	ctx := c.e.handlerCtx
	qm := c.q.metrics
	c.e.inst.inFlight.Add(ctx, 1, qm.queueAdd...)
	w.begin(d, m)
	began := time.Now()
	a := c.serve(m)
	took := time.Since(began)
	c.e.inst.inFlight.Add(ctx, -1, qm.queueAdd...)
	if !w.end() {
		c.e.log.Warn("acemq: a handler cut off by the shutdown deadline returned; its answer is discarded, as its message went back to the broker at the deadline",
			zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.String("answer", a.String()), zap.Duration("took", took))
		return false
	}
	if isClosed(c.e.stop.cut) { // it returned as the deadline cancelled it
		c.e.stop.cutHandlers.Add(1)
		c.logCut(m)
		c.giveBack(d) // the broker redelivers it
		return true
	}
	o := min(int(a.Outcome()), len(qm.handled)-1)
	c.e.inst.handled.Add(ctx, 1, qm.handled[o]...)
	c.e.inst.duration.Record(ctx, took.Seconds(), qm.duration[o]...)
	c.settle(d, m, decide(c.q, m.env, a, c.e.clock.Now()))
	return true
}

// cutOff gives back, at the deadline, the delivery of every handler still
// running, so that another instance takes it now rather than when (or if)
// the handler returns. The worker is then abandoned: the stop counts it as
// ended, and its goroutine ends on its own once the handler returns, with
// its answer discarded. It reports how many it cut off.
func (c *consumer) cutOff() int {
	n := 0
	for _, w := range c.workers {
		if d, m, ok := w.takeOver(); ok {
			n++
			c.logCut(m)
			c.giveBack(d) // the broker redelivers it
		}
	}
	return n
}

func (c *consumer) logCut(m *Message) {
	c.e.log.Warn("acemq: shutdown deadline cut the handler off; the message goes back to the broker",
		zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()))
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
