package acemq

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// engine is one Run of a Server: its consumers, workers and waits.
type engine struct {
	s      *Server
	t      transport.Transport
	log    *zap.Logger
	clock  transport.Clock
	inst   *instruments
	queues []*consumer
	failed chan error // a consumer whose deliveries ended unasked

	handlerCtx     context.Context // handlers run under it; cancelled at the deadline
	cancelHandlers context.CancelFunc
	cut            atomic.Bool   // the deadline passed
	cutHandlers    atomic.Int64  // handlers it cut off
	abandon        chan struct{} // closed when the drain stops waiting for deliveries
	flushWaits     chan struct{} // closed when the drain has cancelled the consumers
	workers        sync.WaitGroup
	waits          sync.WaitGroup // in-process retry waits
}

// consumer is one queue being consumed.
type consumer struct {
	e       *engine
	name    string
	cfg     QueueConfig
	sub     transport.Subscription
	metrics *queueMetrics
}

func (s *Server) newEngine(ctx context.Context) (*engine, error) {
	names, err := s.queueNames()
	if err != nil {
		return nil, err
	}
	log := s.Logger
	if log == nil {
		log = zap.NewNop()
	}
	e := &engine{
		s:          s,
		t:          s.Transport,
		log:        log,
		clock:      clockOf(s.Transport, s.Clock),
		inst:       newInstruments(s.MeterProvider),
		failed:     make(chan error, len(names)),
		abandon:    make(chan struct{}),
		flushWaits: make(chan struct{}),
	}
	if e.t == nil {
		return nil, fmt.Errorf("acemq: Server.Transport is nil")
	}
	e.handlerCtx, e.cancelHandlers = context.WithCancel(context.WithoutCancel(ctx))
	for _, name := range names {
		cfg := s.queueConfig(name)
		if cfg.NoDeclare {
			if rungs := cfg.Retry.BrokerRungs(); len(rungs) > 0 {
				log.Warn("acemq: declare is off, so no rung is used: every wait of this queue's policy is held in the process; set the policy's WaitInBrokerFrom(0) to say so",
					zap.String("queue", name), zap.String("rung", retry.RungName(name, rungs[0])))
			}
			continue
		}
		if err := e.t.Declare(ctx, Topology(name, cfg.Retry, cfg.Args)); err != nil {
			e.cancelHandlers()
			return nil, fmt.Errorf("acemq: declare topology of queue %s: %w", name, err)
		}
	}
	for _, name := range names {
		cfg := s.queueConfig(name)
		sub, err := e.t.Consume(ctx, name, transport.ConsumeOptions{Prefetch: cfg.Prefetch})
		if err != nil {
			e.closeSubscriptions()
			e.cancelHandlers()
			return nil, fmt.Errorf("acemq: consume queue %s: %w", name, err)
		}
		e.queues = append(e.queues, &consumer{e: e, name: name, cfg: cfg, sub: sub, metrics: newQueueMetrics(name)})
	}
	for _, c := range e.queues {
		c.start()
	}
	return e, nil
}

func (c *consumer) start() {
	var alive sync.WaitGroup
	for range c.cfg.Concurrency {
		alive.Add(1)
		c.e.workers.Add(1)
		go func() {
			defer c.e.workers.Done()
			defer alive.Done()
			c.work()
		}()
	}
	c.e.workers.Add(1)
	go func() { // reports a subscription that ended without being asked to
		defer c.e.workers.Done()
		alive.Wait()
		if !c.stopping() {
			c.e.failed <- fmt.Errorf("acemq: consumer of queue %s ended: %w", c.name, transport.ErrClosed)
		}
	}()
}

// work handles deliveries until the subscription's channel closes or the
// drain abandons it. Workers read the subscription directly: no hand-off on
// the hot path.
func (c *consumer) work() {
	c.each(func(d transport.Delivery) {
		if c.stopping() {
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
// or the drain abandons it.
func (c *consumer) each(f func(transport.Delivery)) {
	deliveries := c.sub.Deliveries()
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return
			}
			f(d)
		case <-c.e.abandon:
			return
		}
	}
}

func (c *consumer) stopping() bool { return isClosed(c.e.s.stopping) }

// handle runs the handler on one delivery and settles its answer.
func (c *consumer) handle(d transport.Delivery) {
	m := newMessage(d, c.e.clock.Now)
	ctx := c.e.handlerCtx
	c.e.inst.inFlight.Add(ctx, 1, c.metrics.queueSet)
	began := time.Now()
	a := c.serve(m)
	took := time.Since(began)
	c.e.inst.inFlight.Add(ctx, -1, c.metrics.queueSet)
	if c.e.cut.Load() && c.e.handlerCtx.Err() != nil {
		c.e.cutHandlers.Add(1)
		c.e.log.Warn("acemq: shutdown deadline cut the handler off; the message goes back to the broker",
			zap.String("queue", c.name), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()))
		c.giveBack(d) // the broker redelivers it
		return
	}
	o := min(int(a.Outcome()), len(c.metrics.handled)-1)
	c.e.inst.handled.Add(ctx, 1, c.metrics.handled[o])
	c.e.inst.duration.Record(ctx, took.Seconds(), c.metrics.duration[o])
	c.settle(d, m, a)
}

// serve calls the handler, turning a panic into a failure that follows the
// retry policy: a panic must never take the process, and with it every
// unsettled message of every queue, down.
func (c *consumer) serve(m *Message) (a ack.Ack) {
	defer func() {
		if r := recover(); r != nil {
			c.e.log.Error("acemq: handler panicked", zap.String("queue", c.name), zap.String("id", m.ID()),
				zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			a = ack.Retry(fmt.Errorf("acemq: handler panicked: %v", r))
		}
	}()
	return c.e.s.Handler.ServeMessage(c.e.handlerCtx, m)
}

func (c *consumer) giveBack(d transport.Delivery) {
	if err := d.Reject(true); err != nil {
		c.e.log.Debug("acemq: give back", zap.String("queue", c.name), zap.Error(err))
	}
}

// drain runs the shutdown: stop receiving, let running handlers finish until
// the deadline, cut the rest off, then release the subscriptions. It reports
// whether a handler was cut off.
func (e *engine) drain(deadline time.Time) bool {
	cancelCtx, cancel := context.WithDeadline(context.Background(), deadline.Add(5*time.Second))
	for _, c := range e.queues {
		if err := c.sub.Cancel(cancelCtx); err != nil {
			e.log.Warn("acemq: cancel consumer", zap.String("queue", c.name), zap.Error(err))
		}
	}
	cancel()
	for _, c := range e.queues {
		e.workers.Add(1)
		go func() {
			defer e.workers.Done()
			c.giveBackUnstarted()
		}()
	}
	close(e.flushWaits) // consumers cancelled: a republished wait cannot come back to us
	finished := make(chan struct{})
	go func() {
		e.workers.Wait()
		e.waits.Wait()
		close(finished)
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-finished:
	case <-timer.C:
		e.cut.Store(true)
		e.cancelHandlers()
		close(e.abandon)
		<-finished // handlers see their context end; waits republish at once
	}
	e.cancelHandlers()
	e.closeSubscriptions()
	return e.cutHandlers.Load() > 0
}

func (e *engine) closeSubscriptions() {
	for _, c := range e.queues {
		if err := c.sub.Close(); err != nil {
			e.log.Debug("acemq: close subscription", zap.String("queue", c.name), zap.Error(err))
		}
	}
}
