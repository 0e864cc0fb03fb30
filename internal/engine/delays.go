package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

// delayQueues says whether the delay queues can carry the server's waits,
// declaring them where the server may. A server that may not (declare off,
// or refused configure rights) checks that they exist: when a queue's
// policy spends its waits there, their absence stops Run with
// ErrMissingTopology; otherwise the waits a handler chooses (RetryAfter,
// Snooze) are held in the process instead, and a warning says so.
func (e *Engine) delayQueues(ctx context.Context, queues []*queueRun) (bool, error) {
	declare := slices.ContainsFunc(queues, func(q *queueRun) bool { return q.declare })
	if declare {
		err := e.declareDelays(ctx)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, transport.ErrAccessRefused) {
			return false, err
		}
		e.log.Warn("acemq: may not declare the delay queues; checking that they exist", zap.Error(err))
	}
	missing, err := e.missingDelays(ctx)
	if err != nil {
		return false, err
	}
	if len(missing) == 0 {
		return true, nil
	}
	for _, q := range queues {
		if q.policy.UsesDelayQueues() {
			return false, fmt.Errorf("%w: queue %s's retry policy waits on the delay queues, and %s does not exist; declare them with: acemq topology --delays --queue %s --apply",
				ErrMissingTopology, q.name, missing[0], q.name)
		}
	}
	e.log.Warn("acemq: the delay queues do not exist, so a wait a handler chooses (ack.RetryAfter, ack.Snooze) is held in the process; declare them with: acemq topology --delays --apply",
		zap.String("missing", missing[0]))
	return false, nil
}

// declareDelays declares the delay queues: on quorum queues where the
// broker supports them, else the classic layout, whose loss mode
// docs/operators.md states. Queues declared classic by an older broker are
// kept after an upgrade: RabbitMQ refuses to change a queue's type.
func (e *Engine) declareDelays(ctx context.Context) error {
	quorum := delay.SupportsQuorum(e.broker.product, e.broker.version)
	if !quorum {
		e.log.Warn("acemq: the broker cannot hold quorum queues with at-least-once dead-lettering, so the delay queues are classic: a node lost while messages wait on them loses those messages",
			zap.String("product", e.broker.product), zap.String("version", e.broker.version))
	}
	top := delay.Topology()
	if !quorum {
		top = delay.ClassicTopology()
	}
	err := e.t.Declare(ctx, top)
	if quorum && errors.Is(err, transport.ErrPreconditionFailed) {
		if e.t.Declare(ctx, delay.ClassicTopology()) == nil {
			e.log.Warn("acemq: the delay queues were declared classic (by an older broker) and are kept so; a node lost while messages wait on them loses those messages. " +
				"To have quorum ones, delete them when acemq delays shows them empty and restart")
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("acemq: declare the delay queues: %w", err)
	}
	return nil
}

// missingDelays names the delay queues that do not exist, and their
// exchanges where the transport can check an exchange
// (transport.ExchangeInspector; named "exchange X"), checked passively.
func (e *Engine) missingDelays(ctx context.Context) ([]string, error) {
	var missing []string
	for _, n := range delay.Queues() {
		_, err := e.t.Inspect(ctx, n)
		switch {
		case errors.Is(err, transport.ErrNotFound):
			missing = append(missing, n)
		case err != nil:
			return nil, fmt.Errorf("acemq: check the delay queues: %w", err)
		}
	}
	xi, ok := e.t.(transport.ExchangeInspector)
	if !ok {
		return missing, nil
	}
	for _, n := range delay.Exchanges() {
		err := xi.InspectExchange(ctx, n)
		switch {
		case errors.Is(err, transport.ErrNotFound):
			missing = append(missing, "exchange "+n)
		case err != nil:
			return nil, fmt.Errorf("acemq: check the delay exchanges: %w", err)
		}
	}
	return missing, nil
}

// bindDelays binds q to the delay queues' deliver exchange, so that its
// due messages reach it at once. Without the binding (a user that may not
// bind) they still arrive, through acemq.delay.v1.undeliverable, up to
// RedeliverEvery late.
func (e *Engine) bindDelays(ctx context.Context, q *queueRun) error {
	b, err := delay.Bind(q.name)
	if err != nil {
		return nil // delayable checked it: the queue's waits are held in the process
	}
	if err := e.t.Declare(ctx, transport.Topology{Bindings: []transport.Binding{b}}); err != nil {
		if errors.Is(err, transport.ErrAccessRefused) {
			e.log.Warn("acemq: may not bind the queue to the delay queues; its delayed messages arrive through "+delay.Undeliverable+", up to "+e.cfg.RedeliverEvery.String()+" late. Bind it: acemq topology --delays --apply --queue "+q.name,
				zap.String("queue", q.name), zap.Error(err))
			return nil
		}
		return fmt.Errorf("acemq: bind queue %s to %s: %w", q.name, delay.Deliver, err)
	}
	return nil
}

// delayable says whether a delayed message can name q as its destination
// (delay.CanDeliver); a queue it cannot has its waits held in the
// process, and a warning says so once.
func (e *Engine) delayable(q *queueRun) bool {
	if err := delay.CanDeliver(q.name); err != nil {
		e.log.Warn("acemq: the delay queues cannot deliver to this queue, so its long waits are held in the process", zap.String("queue", q.name), zap.Error(err))
		return false
	}
	return true
}

// redeliverDue sends the due messages for the server's own queues whose
// queue was missing round again every RedeliverEvery, and checks the delay
// queues' layout every acemq.DelayCheckEvery and whenever a publish asks
// (noticeDelayMissing), until the stop is requested; the due messages for
// other queues are left to whoever serves them. It runs on the wall clock,
// not the engine's: a destination comes back in real time, also under a
// memory broker whose virtual clock stands still (the level queues' waits
// are the ones that move with it).
func (e *Engine) redeliverDue(queues []*queueRun) {
	var own []string
	for _, q := range queues {
		if q.delays {
			own = append(own, q.name)
		}
	}
	arrived := metric.WithAttributes(attribute.String("result", "arrived"))
	waiting := metric.WithAttributes(attribute.String("result", "waiting"))
	every := e.cfg.RedeliverEvery
	tick := time.NewTicker(every)
	defer tick.Stop()
	var lastAsked time.Time
	for pass := 1; ; pass++ {
		select {
		case <-tick.C:
		case part := <-e.delayWatch.requests():
			pass-- // not a pass of the loop
			if time.Since(lastAsked) >= delayCheckGap {
				lastAsked = time.Now()
				e.checkDelays(queues, part)
			}
			continue
		case <-e.stop.requested:
			return
		}
		if pass%delayCheckPasses == 0 {
			e.checkDelays(queues, "")
		}
		ctx, cancel := context.WithTimeout(context.Background(), e.publishTimeout)
		r, err := delay.Redeliver(ctx, e.t, delay.Only(own...))
		cancel()
		if r.Arrived > 0 {
			e.inst.redelivered.Add(context.Background(), int64(r.Arrived), arrived)
			e.log.Info("acemq: due delayed messages reached a destination that was missing when they were due", zap.Int("arrived", r.Arrived))
		}
		for to, n := range r.Waiting {
			e.inst.redelivered.Add(context.Background(), int64(n), waiting)
			e.log.Warn("acemq: due delayed messages wait in "+delay.Undeliverable+" for a queue that does not exist; they go round again every "+e.cfg.RedeliverEvery.String(),
				zap.String("destination", to), zap.Int("messages", n))
		}
		if err != nil && !errors.Is(err, transport.ErrClosed) {
			e.log.Warn("acemq: redeliver due delayed messages", zap.Error(err))
		}
	}
}
