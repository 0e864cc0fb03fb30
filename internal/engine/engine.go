package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/logging"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// engine is one Run of a Server. It owns everything the run starts: the
// consumers, their workers, the messages held in the process, and the stop
// (stop.go) that ends them in a documented order.
type Engine struct {
	t               transport.Transport
	log             *zap.Logger
	clock           transport.Clock  // message time: waits and ages
	now             func() time.Time // clock.Now, made once: every Message keeps it
	inst            *instruments
	publishTimeout  time.Duration
	shutdownTimeout time.Duration
	handlerTimeout  time.Duration // <= 0: none
	cfg             Config
	instance        string // this engine's id in its breaker markers' names (breaker_marker.go)

	broker     brokerInfo // what the broker said it is, read once by subscribe
	consumers  []*consumer
	failed     chan error // a consumer whose deliveries ended unasked
	overdue    overdueSet // messages whose handler ran past the handler timeout
	refused    refusals   // the broker's refusals of consumers' connections for now (refusals.go)
	delayWatch delayWatch // asks for the delay queues' layout to be checked now (delays_watch.go)
	stop       *stop
	running    sync.WaitGroup // every goroutine below

	handlerCtx     context.Context // handlers run under it; cancelled when the stop cuts them off
	cancelHandlers context.CancelFunc
}

// New makes the engine of one Run from its settings; it does no I/O and
// starts nothing, so a Shutdown can find the engine before it has
// declared.
func New(cfg Config) *Engine {
	return &Engine{
		t:               cfg.Transport,
		log:             logging.Or(cfg.Logger),
		clock:           cfg.Clock,
		now:             cfg.Clock.Now,
		inst:            newInstruments(cfg.MeterProvider),
		publishTimeout:  cfg.PublishTimeout,
		shutdownTimeout: cfg.ShutdownTimeout,
		handlerTimeout:  cfg.HandlerTimeout,
		cfg:             cfg,
		stop:            newStop(),
		instance:        newInstance(),
	}
}

// Run resolves the queues' settings (resolve, the root's), declares,
// subscribes and works until a stop is requested or a consumer fails,
// then drains. It closes the stop's ended as it returns.
func (e *Engine) Run(ctx context.Context, resolve func() ([]Queue, error)) error {
	defer close(e.stop.ended)
	specs, err := resolve()
	if err != nil {
		return err
	}
	queues := make([]*queueRun, len(specs))
	for i, q := range specs {
		queues[i] = newQueueRun(q)
	}
	throttles, err := e.throttles()
	if err != nil {
		return err
	}
	underThrottles(queues, throttles)
	if err := e.breakers(queues); err != nil {
		return err
	}
	if e.t == nil {
		return fmt.Errorf("acemq: Server.Transport is nil")
	}
	e.handlerCtx, e.cancelHandlers = context.WithCancel(context.WithoutCancel(ctx))
	defer e.cancelHandlers()
	if err := e.subscribe(ctx, queues); err != nil {
		stopped := ctx.Err() != nil || isClosed(e.stop.requested)
		e.stop.request(time.Now())
		e.running.Wait() // what the queues consumed so far started (a breaker's marker keeper)
		e.closeSubscriptions()
		if stopped {
			// Asked to stop while it was still starting (a consume
			// refused for now, waited on): nothing was handled, and the
			// wait's end is no failure.
			return nil
		}
		return err
	}
	e.failed = make(chan error, len(e.consumers))
	for _, c := range e.consumers {
		c.consuming.Store(true)
		c.start()
	}
	e.logStarted(queues) // before Ready: a caller told Run is ready finds the line written
	if e.cfg.Ready != nil {
		e.cfg.Ready()
	}
	started := time.Now()
	defer e.watchHandlers()() // after the drain, when no handler of the engine's runs
	var failure error
	select {
	case <-ctx.Done():
		e.stop.request(time.Now().Add(e.shutdownTimeout))
	case <-e.stop.requested:
	case failure = <-e.failed:
		e.stop.request(time.Now().Add(e.shutdownTimeout))
	}
	e.drain()
	e.logStopped(started, failure)
	switch {
	case failure != nil:
		return failure
	case e.stop.cutOff():
		return ErrCutOff
	}
	return nil
}

// subscribe declares every queue's topology (where declare is on) or
// checks it is there (where it is off), then consumes each queue: all
// declarations first, so that no message arrives before every rung and
// delay queue it may need exists.
func (e *Engine) subscribe(ctx context.Context, queues []*queueRun) error {
	if err := e.identify(ctx); err != nil {
		return err
	}
	for _, q := range queues { // before anything is declared
		if err := e.checkDeliveryLimit(q); err != nil {
			return err
		}
	}
	delays, err := e.delayQueues(ctx, queues)
	if err != nil {
		return err
	}
	for _, q := range queues {
		q.delays = delays && e.delayable(q)
		if !q.declare {
			if rungs := q.policy.BrokerRungs(); len(rungs) > 0 {
				e.log.Warn("acemq: declare is off, so no rung is used: every wait of this queue's policy is held in the process; set the policy's WithBrokerWaitThreshold(0) to say so",
					zap.String("queue", q.name), zap.String("rung", retry.RungName(q.name, rungs[0])))
			}
			if err := e.preflight(ctx, q); err != nil {
				return err
			}
			continue
		}
		e.warnRungsOnCluster(q) // cluster.go
		if err := e.declare(ctx, q); err != nil {
			return err
		}
	}
	for _, q := range queues {
		sub, err := e.consume(ctx, q)
		if err != nil {
			return err
		}
		c := &consumer{e: e, q: q}
		c.consumeOn(sub)
		e.consumers = append(e.consumers, c)
		if q.breaker != nil {
			c.markerWake = make(chan struct{}, 1)
			e.spawn(c.keepMarker)
		}
	}
	if delays {
		e.spawn(func() { e.redeliverDue(queues) })
	}
	return nil
}

// declare declares q's topology, and binds it to the delay queues where
// it uses them: at start-up, and again when a queue of it was deleted
// under the server.
func (e *Engine) declare(ctx context.Context, q *queueRun) error {
	if err := e.t.Declare(ctx, q.topology); err != nil {
		return fmt.Errorf("acemq: declare topology of queue %s: %w", q.name, err)
	}
	if len(q.subscriptions.Exchanges)+len(q.subscriptions.Bindings) > 0 {
		if err := e.t.Declare(ctx, q.subscriptions); err != nil {
			return fmt.Errorf("acemq: declare the bindings of queue %s: %w", q.name, err)
		}
	}
	if q.delays {
		return e.bindDelays(ctx, q)
	}
	return nil
}

// consume subscribes to q: at start-up, and again after the broker ended
// its consumer.
func (e *Engine) consume(ctx context.Context, q *queueRun) (transport.Subscription, error) {
	return e.consumeAt(ctx, q, q.prefetch)
}

// consumeAt subscribes to q at prefetch: the queue's own, or its breaker's
// probes.
func (e *Engine) consumeAt(ctx context.Context, q *queueRun, prefetch int) (transport.Subscription, error) {
	opts := e.consumeOptions(q)
	opts.Prefetch = prefetch
	sub, err := e.consumeRefusable(ctx, q, opts) // brokertimeout.go, refusals.go
	if err != nil {
		return nil, fmt.Errorf("acemq: consume queue %s: %w", q.name, err)
	}
	return sub, nil
}

// brokerInfo is the product and version the broker announced (the AMQP
// server properties); empty when the transport does not say.
type brokerInfo struct{ product, version string }

// major is the RabbitMQ major version, 0 when unknown.
func (b brokerInfo) major() int {
	if b.product != "RabbitMQ" {
		return 0
	}
	var major int
	_, _ = fmt.Sscanf(b.version, "%d", &major)
	return major
}

// identify asks the broker what it is, once: the delay queues' layout and
// the delivery-limit check depend on its version.
func (e *Engine) identify(ctx context.Context) error {
	v, ok := e.t.(transport.Versioned)
	if !ok {
		return nil
	}
	product, version, err := v.BrokerVersion(ctx)
	if err != nil {
		return fmt.Errorf("acemq: ask the broker its version: %w", err)
	}
	e.broker = brokerInfo{product, version}
	return nil
}
