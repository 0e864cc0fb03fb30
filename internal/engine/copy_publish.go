package engine

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// publishOnce publishes the copy h of m once, by queue name, mandatory,
// with the wire contract's headers and without the broker's own, under a
// producer span that is a child of the process span in ctx and whose
// context the copy carries in place of the one it came with: the next
// attempt's process span joins the trace. It says what became of it; what
// that means for the original is next's to say.
func (c *consumer) publishOnce(ctx context.Context, m message, d transport.Delivery, h hop) (published, error) {
	p := wire.Copy(d, *m.env, h.to, h.attempt, h.reason)
	if h.snoozes > 0 {
		p.Headers[wire.Snoozes] = int64(h.snoozes)
	}
	if h.trim {
		p = wire.Trim(p)
	}
	if h.delayed {
		if _, err := delay.Aim(&p, h.to, h.delay, c.e.clock.Now()); err != nil {
			return copyUnknown, err // the queue run checked the name and the delay's bound
		}
	}
	// The wait ends at the publish timeout, or at the stop's cut
	// (handlerCtx ends with it): a publish that waits for a connection
	// refused for now, or for a confirm, is an unknown outcome then, its
	// original given back, and Run keeps the shutdown's deadline instead
	// of PublishTimeout. The process span stays the parent.
	pctx, cancel := context.WithTimeout(c.e.handlerCtx, c.e.publishTimeout)
	defer cancel()
	if h.to == c.q.deadLetter && c.e.cfg.BeforeDeadLetter != nil {
		set, err := c.e.cfg.BeforeDeadLetter(trace.ContextWithSpan(pctx, trace.SpanFromContext(ctx)), m.user, h.reason)
		if err != nil {
			return copyHookFailed, err
		}
		for k, v := range set {
			if !wire.IsStamped(k) && !wire.IsBrokerOwned(k) {
				p.Headers[k] = v
			}
		}
	}
	tracer, prop := c.e.tracing()
	pctx, span := telemetry.StartPublish(trace.ContextWithSpan(pctx, trace.SpanFromContext(ctx)), tracer,
		telemetry.Publish{Exchange: p.Exchange, RoutingKey: p.RoutingKey, ID: m.env.ID, CorrelationID: p.CorrelationID, BodySize: len(p.Body)},
		telemetry.AttrTo.String(h.to), telemetry.AttrAttempt.Int(h.attempt))
	defer span.End()
	prop.Inject(pctx, p.Headers)
	began := time.Now()
	conf, err := c.e.t.Publish(pctx, p)
	c.e.inst.confirm.Record(pctx, time.Since(began).Seconds(), c.q.metrics.queueRec...)
	r := publishedOf(conf, err, h.delayed)
	switch {
	case r == copyUnroutable && err == nil:
		telemetry.Fail(span, telemetry.Unroutable, nil)
	case err != nil:
		telemetry.Fail(span, "", err)
	}
	return r, err
}

// publishedOf is what a copy's publish came to, from the transport's
// answer: the row of the fallback table (next.go) it starts. delayed says
// the copy went to a delay level, whose missing exchange is a missing
// level, not a missing destination.
func publishedOf(conf transport.Confirmation, err error, delayed bool) published {
	switch {
	case err == nil && conf.Routed:
		return copyRouted
	case err == nil:
		return copyUnroutable
	case errors.Is(err, transport.ErrNacked):
		return copyNacked
	case errors.Is(err, transport.ErrBlocked), errors.Is(err, transport.ErrStalled): // not sent
		return copyBlocked
	case errors.Is(err, transport.ErrTooLarge):
		return copyTooLarge
	case delayed && errors.Is(err, transport.ErrNotFound): // the level's exchange
		return copyUnroutable
	case refusedForGood(err):
		return copyForGood
	}
	return copyUnknown
}
