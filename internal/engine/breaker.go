package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/transport"
)

// A queue's circuit breaker (internal/flow) decides, from its handlers'
// answers, whether deliveries may start; this file carries that out on
// the queue's subscription. Open: the consumer is cancelled, so that the
// broker keeps the messages (ready, visible, spending nothing); what was
// prefetched and not started goes back once the cancel took; retries in
// flight finish their waits on the old subscription, which closes once
// they are settled (lease.go). After the cool-down the queue is consumed
// again at the breaker's probes (prefetch and workers), and once it closes
// at the queue's own. The supervisor is the one place that consumes again
// (supervise.go), for the breaker as for a broker that ended the consumer.

// breakers makes each queue's breaker, on the engine's clock, before
// anything is declared: a setting it refuses stops Run.
func (e *Engine) breakers(queues []*queueRun) error {
	for _, q := range queues {
		if q.breakerSettings == nil {
			continue
		}
		b, err := flow.NewBreaker(e.clock, *q.breakerSettings)
		if err != nil {
			return fmt.Errorf("acemq: the breaker of queue %s: %w", q.name, err)
		}
		q.breaker = b
	}
	return nil
}

// allow asks the queue's breaker whether the delivery d, just taken, may
// start. While its probes all run (half-open), d waits for one to end.
// While it is open, d goes back to the broker once the consumer's cancel
// took, so that it waits there, and allow reports false.
func (c *consumer) allow(w *worker, d transport.Delivery) (flow.Permit, bool) {
	b := c.q.breaker
	if b == nil {
		return flow.Permit{}, true
	}
	for {
		dec := b.Allow()
		c.breakerTurned(dec.Event)
		if dec.Start {
			return dec.Permit, true
		}
		if dec.State == flow.HalfOpen {
			select {
			case <-dec.Wake:
				continue
			case <-c.e.stop.requested:
				<-c.e.stop.cancelled // given back before the cancel, it would come straight back (see work)
			}
		} else {
			select {
			case <-c.switchSubscription(): // the one that tripped it may not have yet
			case <-c.e.stop.requested:
				<-c.e.stop.cancelled
			}
		}
		c.end(d, message{}, unstartedOn(w.lease))
		return flow.Permit{}, false
	}
}

// report tells the queue's breaker how the delivery it let start went:
// the handler's answer, or nothing (answered false) when the answer was
// discarded or no handler ran.
func (c *consumer) report(p flow.Permit, a ack.Ack, answered bool) {
	b := c.q.breaker
	if b == nil {
		return
	}
	if !answered {
		c.breakerTurned(b.Report(p, flow.Ignored, nil))
		return
	}
	c.breakerTurned(b.Done(p, a))
}

// breakerTurned logs, counts and carries out a change of the breaker.
func (c *consumer) breakerTurned(ev flow.Event) {
	if !ev.Changed() {
		return
	}

	c.e.inst.breaker.Add(context.Background(), 1, c.q.metrics.with(attribute.String("state", ev.To.String())))
	c.traceTurn(ev)
	c.wakeMarker()
	c.wakeResume()
	fields := []zap.Field{zap.String("queue", c.q.name), zap.String("from", ev.From.String()), zap.String("to", ev.To.String()), zap.String("why", ev.Why)}
	switch ev.To {
	case flow.Open:
		c.e.log.Warn("acemq: the queue's breaker opened; its consumer is cancelled and its messages wait in the broker until it probes again",
			append(fields, zap.Time("until", ev.Until))...)
		c.switchSubscription()
	case flow.HalfOpen:
		c.e.log.Info("acemq: the queue's breaker probes", fields...)
	case flow.Closed:
		c.e.log.Info("acemq: the queue's breaker closed; the queue is consumed as before", fields...)
		c.switchSubscription() // from the probes' prefetch to the queue's
	}
}

// traceTurn records the change as a span of its own, "breaker Q", which
// begins and ends at the change: a change is not part of any delivery's
// work, though one delivery's answer may have made it.
func (c *consumer) traceTurn(ev flow.Event) {
	tracer, _ := c.e.tracing()
	_, span := tracer.Start(context.Background(), "breaker "+c.q.name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(semconv.MessagingDestinationName(c.q.name), telemetry.AttrBreakerFrom.String(ev.From.String()),
			telemetry.AttrBreakerTo.String(ev.To.String()), telemetry.AttrBreakerWhy.String(ev.Why)))
	span.End()
}

// wakeResume wakes a supervisor waiting out the cool-down, so that a
// breaker closed (Reset) during it is consumed again at once.
func (c *consumer) wakeResume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.breakerTurns != nil {
		close(c.breakerTurns)
		c.breakerTurns = nil
	}
}

// turns is closed at the breaker's next change.
func (c *consumer) turns() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.breakerTurns == nil {
		c.breakerTurns = make(chan struct{})
	}
	return c.breakerTurns
}

// switchSubscription cancels the consumer's subscription, once per
// switch, so that the supervisor consumes again as the breaker's state
// says. The returned channel is closed once the cancel took.
func (c *consumer) switchSubscription() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.switching != nil {
		return c.switching
	}
	done := make(chan struct{})
	c.switching = done
	sub := c.sub
	c.e.spawn(func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), c.e.publishTimeout)
		defer cancel()
		if err := sub.Cancel(ctx); err != nil {
			c.e.log.Warn("acemq: cancel the consumer for the breaker", zap.String("queue", c.q.name), zap.Error(err))
		}
	})
	return done
}

// switched says the subscription ended because the breaker switched it.
func (c *consumer) switched() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.switching != nil
}

// resume consumes the queue again after the breaker switched it: once an
// open breaker's cool-down is over (on the engine's clock), at its probes'
// prefetch and workers while it is not closed, at the queue's own once it
// is. It returns the new subscription and its workers' group, or nil when
// a stop came first, or the broker's reason when it refuses for good.
func (c *consumer) resume() (transport.Subscription, *sync.WaitGroup, error) {
	b := c.q.breaker
	for {
		turned := c.turns() // before the status, so that no change is missed
		st := b.Status()
		wait := st.Until.Sub(c.e.clock.Now())
		if st.State != flow.Open || wait <= 0 {
			break
		}
		c.coolingDown.Store(true)
		select {
		case <-c.e.clock.After(wait):
		case <-turned:
		case <-c.e.stop.requested:
			c.coolingDown.Store(false)
			return nil, nil, nil
		}
		c.coolingDown.Store(false)
	}
	workers, prefetch := c.q.concurrency, c.q.prefetch
	if b.State() != flow.Closed {
		probes := b.Settings().Probes
		workers, prefetch = probes, probes
	}
	sub, err := c.consumeAgain(false, "consume the queue again for its breaker",
		func(ctx context.Context) (transport.Subscription, error) { return c.e.consumeAt(ctx, c.q, prefetch) })
	if sub == nil {
		return nil, nil, err
	}
	return sub, c.startWorkersN(sub, workers), nil
}

// judgedAt is the time decide judges m's age at: now, less the time the
// queue's breaker has kept it waiting in the broker since it was first
// published. A message held back by the breaker for a ten-minute outage
// is not given up on as too old at its first delivery after it, for time
// it spent waiting because of the breaker, not because of its retries.
// The handler (Message.Age, middleware.MaxAge) still sees its true age.
// judgedFor is judgedAt for an answer whose decision reads the time (a
// retry's or a snooze's age), and the zero time for the others, which
// decide never reads: a clock read less for every accepted message.
func (c *consumer) judgedFor(m message, a ack.Ack) time.Time {
	if o := a.Outcome(); o != ack.OutcomeRetry && o != ack.OutcomeSnooze {
		return time.Time{}
	}
	return c.judgedAt(m)
}

func (c *consumer) judgedAt(m message) time.Time {
	now := c.e.clock.Now()
	if b := c.q.breaker; b != nil {
		now = now.Add(-b.Held(m.env.CreatedAt))
	}
	return now
}

// breakerOpen says, for readiness, why the queue takes no deliveries
// because of its breaker; "" when it does.
func (c *consumer) breakerOpen() string {
	b := c.q.breaker
	if b == nil || b.State() != flow.Open {
		return ""
	}
	st := b.Status()
	return fmt.Sprintf("queue %s: its breaker is open since %s (%s), probing at %s", c.q.name,
		st.Since.Format(time.RFC3339), st.Why, st.Until.Format(time.RFC3339))
}
