package acemq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/backoff"
	"github.com/acemq/acemq/transport"
)

// refused handles a copy the broker would not take, never as a silent
// loss. A queue with a dead-letter route of its own rejects the original
// to it. Any other original is held unacknowledged (it keeps a prefetch
// slot, so the consumer slows instead of losing) while the copy is tried
// again with backoff, after declaring the missing queue again where the
// server may declare: until a copy is placed, a stop gives the original
// back, or the outcome turns unknown (then it goes back too).
func (c *consumer) refused(d transport.Delivery, m *Message, v settling, r published) {
	why, detail := c.whyRefused(v.copy.to, r)
	attrs := c.q.metrics.with(attribute.String("destination", v.copy.to), attribute.String("why", why))
	c.e.inst.setAsideFailed.Add(v.ctx, 1, attrs)
	fields := append(c.hopFields(m, v.verdict), zap.String("why", why))
	if c.q.hasOwnDeadLetterRoute() {
		c.e.log.Error("acemq: the broker refused the copy ("+detail+"); the original is rejected to the queue's own dead-letter route", fields...)
		c.finish(m, v, outcomeOwnRoute)
		if err := d.Reject(false); err != nil {
			c.e.log.Debug("acemq: reject", zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.Error(err))
		}
		return
	}
	c.e.log.Error("acemq: the broker refused the copy ("+detail+"); the original is held unacknowledged and the copy tried again until it is placed", fields...)
	// The process span ends here, as held: a copy may stay refused for
	// hours. How the original ends is counted when it does.
	c.finish(m, v, outcomeHeld)
	v.held = true
	c.e.spawn(func() { c.holdRefused(d, m, v, why, attrs) })
}

// heldBackoff spaces the tries of a refused copy: a queue deleted or full
// stays so for a while, and each try costs the broker a publish.
var heldBackoff = backoff.Policy{Min: time.Second, Max: 30 * time.Second, Jitter: true}

// holdRefused tries a refused copy again until it is placed.
// attrs are its destination and why, as set.aside.failed counted them.
func (c *consumer) holdRefused(d transport.Delivery, m *Message, v settling, why string, attrs metric.AddOption) {
	since := time.Now()
	c.e.inst.held.Add(context.Background(), 1, attrs)
	defer c.e.inst.held.Add(context.Background(), -1, attrs)
	for n := 0; ; n++ {
		if backoff.Sleep(context.Background(), nil, heldBackoff.Delay(n), c.e.stop.cancelled) != nil {
			c.e.log.Warn("acemq: stopping; a held original goes back to the broker, its copy still refused",
				append(c.hopFields(m, v.verdict), zap.Stringer("held_for", time.Since(since)))...)
			c.finish(m, v, outcomeGivenBack)
			c.giveBack(d)
			return
		}
		if why == "missing" {
			c.redeclare(v.copy.to)
		}
		switch r, _ := c.publishOnce(v.ctx, m, d, v.copy); r {
		case copyRouted, copyUnknown:
			if r == copyRouted {
				c.e.log.Info("acemq: a held copy was placed", append(c.hopFields(m, v.verdict), zap.Stringer("held_for", time.Since(since)))...)
			}
			c.conclude(d, m, v, r)
			return
		case copyUnroutable:
			if v.copy.rung { // the rung is gone for good: wait in the process
				c.conclude(d, m, v, r)
				return
			}
		}
		if n%10 == 9 {
			c.e.log.Warn("acemq: a copy is still refused; the original stays held", append(c.hopFields(m, v.verdict),
				zap.String("why", why), zap.Time("held_since", since), zap.Stringer("held_for", time.Since(since)))...)
		}
	}
}

// redeclare declares the queue's topology again, where the server may
// declare, because missing (a rung, a .dlq) was deleted under it: the next
// copy then finds it. Declaring is idempotent.
func (c *consumer) redeclare(missing string) {
	if !c.q.declare {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.e.publishTimeout)
	defer cancel()
	if strings.HasPrefix(missing, delay.Prefix) {
		if err := c.e.declareDelays(ctx); err != nil {
			c.e.log.Warn("acemq: declare the delay queues again", zap.String("queue", c.q.name), zap.String("missing", missing), zap.Error(err))
			return
		}
	}
	if err := c.e.declare(ctx, c.q); err != nil {
		c.e.log.Warn("acemq: declare a missing queue again", zap.String("queue", c.q.name), zap.String("missing", missing), zap.Error(err))
		return
	}
	c.e.log.Info("acemq: declared a missing queue again", zap.String("queue", c.q.name), zap.String("missing", missing))
}

// whyRefused names why the broker refused a copy to queue, for the log
// and the metric: "missing" (no such queue), "nacked" (the queue exists and
// refuses: full under reject-publish, or without a leader) or "refused".
func (c *consumer) whyRefused(queue string, r published) (why, detail string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.e.t.Inspect(ctx, queue)
	switch {
	case errors.Is(err, transport.ErrNotFound):
		return "missing", "the queue " + queue + " does not exist"
	case err == nil && r == copyNacked:
		return "nacked", fmt.Sprintf("the queue %s exists with %d messages ready and nacked every try: full under x-overflow reject-publish, or without a leader", queue, info.Messages)
	case r == copyNacked:
		return "nacked", "the broker nacked every try"
	}
	return "refused", "no queue took it"
}
