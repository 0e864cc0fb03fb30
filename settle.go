package acemq

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/backoff"
	"github.com/acemq/acemq/internal/logging"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// settling is a verdict on its way to being carried out, with what its
// end reports (finish): the process span, in ctx, and the handler's time.
type settling struct {
	verdict
	ctx  context.Context // the process span's: every copy is its child
	took time.Duration   // how long the handler ran
	ran  bool            // a handler ran: not so for an overdue message's redelivery
	held bool            // the process span ended when the original was held
}

// instead is s carrying out another verdict.
func (s settling) instead(v verdict) settling {
	s.verdict = v
	return s
}

// settle carries out a verdict for one delivery. A copy published at once
// is published on the worker; a copy that waits, or whose first publish
// the broker blocked or nacked, is held on a goroutine of its own (prefetch
// bounds how many), so the workers go on with messages that need no
// publish.
func (c *consumer) settle(d transport.Delivery, m *Message, v settling) {
	switch {
	case v.settle == settleAck:
		c.finish(m, v, outcomeAccept)
		c.ack(d, m)
	case v.settle == settleGiveBack:
		c.finish(m, v, outcomeRequeue)
		c.giveBack(d)
	default:
		if v.where == "process" { // a broker wait counts once the broker took it
			c.count(m, v.verdict)
		}
		if v.copy.wait > 0 {
			c.hold(d, m, v)
			return
		}
		c.send(d, m, v, false)
	}
}

// hold waits out the copy's wait on a goroutine of its own, then sends it.
// A stop does not wait the delay out: once the consumers are cancelled the
// copy goes at once, so nothing is lost and the attempt count is kept.
// (Apart from settle, so that settle's arguments stay off the heap.)
func (c *consumer) hold(d transport.Delivery, m *Message, v settling) {
	c.e.spawn(func() {
		select {
		case <-c.e.clock.After(v.copy.wait):
		case <-c.e.stop.cancelled:
		}
		c.send(d, m, v, true)
	})
}

// published is what became of one copy.
type published uint8

const (
	copyRouted     published = iota // confirmed, and a queue took it
	copyUnroutable                  // confirmed, but no queue took it
	copyNacked                      // the broker refused it
	copyBlocked                     // the broker blocks publishes (a memory or disk alarm)
	copyUnknown                     // no confirm: the channel closed, the timeout passed, the transport failed
	copyTooLarge                    // refused before it was written: over an AMQP limit
)

// conclude ends the original once its copy's fate is known: the one switch
// that every verdict with a copy goes through.
func (c *consumer) conclude(d transport.Delivery, m *Message, v settling, r published) {
	switch {
	case r == copyRouted:
		o := outcomeOfCopy(v.verdict)
		switch {
		case v.cause != "":
			c.e.inst.deadLettered.Add(v.ctx, 1, c.q.metrics.sets(o, v.cause).add...)
			c.e.log.Warn("acemq: message given up on", zap.String("queue", c.q.name), zap.String("id", m.ID()),
				zap.Int("attempt", m.Attempt()), zap.String("outcome", v.cause), zap.String("to", v.copy.to), zap.String("reason", v.copy.reason))
		case v.where == "broker" || v.where == "delays":
			c.count(m, v.verdict)
		case v.stamp:
			c.e.inst.stamped.Add(v.ctx, 1, c.q.metrics.queueAdd...)
			c.e.log.Info("acemq: a message with no id of its own was published again with one, so that its deliveries share it",
				zap.String("queue", c.q.name), zap.String("id", m.ID()))
		}
		c.finish(m, v, o)
		c.ack(d, m)
	case r == copyUnroutable && v.copy.rung:
		rung := attribute.String("rung", v.copy.to)
		c.e.inst.rungMissing.Add(v.ctx, 1, c.q.metrics.with(rung))
		note(v.ctx, "acemq.rung.missing", rung)
		c.e.log.Error("acemq: retry rung queue is missing, so this wait is held in the process instead, where a restart cuts it short. "+
			"Declare it: Transport.Declare(ctx, acemq.Topology(queue, policy, args)), or run the server with declare on (QueueConfig.NoDeclare false)",
			zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.String("rung", v.copy.to), zap.Stringer("wait", v.copy.delay))
		c.redeclare(v.copy.to)
		c.settle(d, m, v.instead(v.inProcessInstead(c.q.name)))
	case r == copyUnroutable && v.copy.delayed:
		level := delayLevel(c.q.name, v.copy.delay)
		rung := attribute.String("rung", level)
		c.e.inst.rungMissing.Add(v.ctx, 1, c.q.metrics.with(rung))
		note(v.ctx, "acemq.rung.missing", rung)
		c.e.log.Error("acemq: the delay queues are missing, so this wait is held in the process instead, where a restart cuts it short. "+
			"Declare them: acemq topology --delays --apply, or run the server with declare on",
			zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.String("level", level), zap.Stringer("wait", v.copy.delay))
		c.redeclare(level)
		c.e.noticeDelayMissing(level)
		c.settle(d, m, v.instead(v.inProcessInstead(c.q.name)))
	case r == copyUnknown || r == copyBlocked:
		c.e.log.Warn("acemq: copy not confirmed; the original goes back to the broker", c.hopFields(m, v.verdict)...)
		c.finish(m, v, outcomeGivenBack)
		c.giveBack(d)
	default: // nacked for good, or reached no queue
		c.refused(d, m, v, r)
	}
}

func (c *consumer) hopFields(m *Message, v verdict) []zap.Field {
	fields := []zap.Field{zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()), zap.String("to", v.copy.to)}
	if v.copy.reason != "" {
		fields = append(fields, zap.String("reason", v.copy.reason))
	}
	return fields
}

// send publishes the verdict's copy and concludes. On a worker (held
// false), a first publish the broker blocked or nacked moves to a held
// goroutine for its retries, which concludes in turn.
func (c *consumer) send(d transport.Delivery, m *Message, v settling, held bool) {
	r, err := c.publishOnce(v.ctx, m, d, v.copy)
	if r == copyTooLarge && !v.copy.trim {
		// Nothing was written and no connection harmed; the same copy
		// would fail the same way every time.
		u := unwritable(c.q, m.env, v.verdict, err)
		c.e.log.Error("acemq: the copy cannot be written; a trimmed copy is parked instead",
			append(c.hopFields(m, v.verdict), zap.String("parked_reason", u.copy.reason))...)
		c.settle(d, m, v.instead(u))
		return
	}
	if r == copyBlocked || r == copyNacked {
		if !held {
			what := "the broker is blocking publishes; holding the message until it clears"
			if r == copyNacked {
				what = "the broker nacked the copy; holding the message to publish it again"
			}
			c.e.log.Warn("acemq: "+what, zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.String("to", v.copy.to))
			c.holdRepublish(d, m, v, r)
			return
		}
		r = c.republish(v.ctx, m, d, v.copy, r)
	}
	c.conclude(d, m, v, r)
}

// holdRepublish republishes on a goroutine of its own, off the worker.
func (c *consumer) holdRepublish(d transport.Delivery, m *Message, v settling, r published) {
	c.e.spawn(func() { c.conclude(d, m, v, c.republish(v.ctx, m, d, v.copy, r)) })
}

// republish owns the retries of a copy whose publish was blocked or
// nacked (r). Two refusals may pass, and are tried again before they count:
//
//   - A broker that blocks publishes (a memory or disk alarm) refuses at
//     once. Giving the original back would bring it straight round again, a
//     hot loop at the head of the queue.
//   - A nack. RabbitMQ nacks a publish its queue could not take just then:
//     a quorum queue electing a new leader, a queue process that crashed
//     and is restarting. Taking the first nack as final would reject the
//     original, and a source queue without dead-lettering of its own would
//     lose it.
//
// So the copy is published again with backoff: while blocked, until the
// alarm clears, the publish timeout passes (then unknown) or the stop cuts
// it off (unknown); while nacked, up to nackRetries more times, after which
// the nack is the broker's answer.
//
// The backoff runs on the wall clock, not the engine's: an alarm clears
// and a leader is elected in real time, also under a memory broker whose
// virtual clock stands still.
func (c *consumer) republish(ctx context.Context, m *Message, d transport.Delivery, h hop, r published) published {
	deadline := time.Now().Add(c.e.publishTimeout)
	nacks := 0
	for n := 0; ; n++ {
		if r == copyNacked {
			if nacks++; nacks > nackRetries {
				return copyNacked
			}
		}
		if backoff.Sleep(context.Background(), nil, republishBackoff.Delay(n), c.e.stop.cut) != nil {
			return copyUnknown // cut off by the stop
		}
		if r, _ = c.publishOnce(ctx, m, d, h); r != copyBlocked && r != copyNacked {
			return r
		}
		if r == copyBlocked && time.Now().After(deadline) {
			return copyUnknown
		}
	}
}

// nackRetries is how many times a nacked copy is published again before
// the nack counts as a refusal. With republishBackoff the last try comes
// 2.5 s after the first nack, time enough for a quorum queue to elect a
// leader.
const nackRetries = 6

// republishBackoff spaces the republishes of a blocked or nacked copy:
// 50 ms doubling, up to 1 s.
var republishBackoff = backoff.Policy{Min: 50 * time.Millisecond, Max: time.Second}

// publishOnce republishes the copy by queue name, mandatory, with the wire
// contract's headers and without the broker's own, under a producer span
// that is a child of the process span in ctx and whose context the copy
// carries in place of the one it came with: the next attempt's process
// span joins the trace.
func (c *consumer) publishOnce(ctx context.Context, m *Message, d transport.Delivery, h hop) (published, error) {
	p := wire.Copy(d, wire.Envelope(m.env), h.to, h.attempt, h.reason)
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
	tracer, prop := c.e.tracing()
	ctx, span := telemetry.StartPublish(ctx, tracer,
		telemetry.Publish{Exchange: p.Exchange, RoutingKey: p.RoutingKey, ID: m.env.ID, CorrelationID: p.CorrelationID, BodySize: len(p.Body)},
		attrTo.String(h.to), attrAttempt.Int(h.attempt))
	defer span.End()
	prop.Inject(ctx, p.Headers)
	ctx, cancel := context.WithTimeout(ctx, c.e.publishTimeout)
	defer cancel()
	// The stop's cut ends the wait too (handlerCtx ends with it): a publish
	// that waits for a connection refused for now, or for a confirm, is
	// an unknown outcome then, its original given back, and Run keeps
	// the shutdown's deadline instead of PublishTimeout.
	defer context.AfterFunc(c.e.handlerCtx, cancel)()
	began := time.Now()
	conf, err := c.e.t.Publish(ctx, p)
	c.e.inst.confirm.Record(ctx, time.Since(began).Seconds(), c.q.metrics.queueRec...)
	switch {
	case err == nil && conf.Routed:
		return copyRouted, nil
	case err == nil:
		telemetry.Fail(span, telemetry.Unroutable, nil)
		return copyUnroutable, nil
	}
	telemetry.Fail(span, "", err)
	switch {
	case errors.Is(err, transport.ErrNacked):
		return copyNacked, err
	case errors.Is(err, transport.ErrBlocked):
		return copyBlocked, err
	case errors.Is(err, transport.ErrTooLarge):
		return copyTooLarge, err
	case h.delayed && errors.Is(err, transport.ErrNotFound): // the level's exchange
		return copyUnroutable, err
	case refusedForGood(err):
		c.refusedCopy(m, h.to, err)
		return copyUnknown, err
	default:
		c.e.log.Warn("acemq: republish", zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.String("to", h.to), zap.Error(err))
		return copyUnknown, err
	}
}

// retryErrorCap bounds the error on a retry's log line: one line per
// attempt, and a wrapped error with its cause is well under a kilobyte.
const retryErrorCap = 1 << 10

// count counts a retry scheduled, by where it waits, or a snooze, and
// logs it with its wait, where it waits and, for a retry, its error.
func (c *consumer) count(m *Message, v verdict) {
	wait, where := v.copy.wait, retry.InProcess
	switch v.where {
	case "broker":
		wait, where = v.copy.delay, retry.OnRung
	case "delays":
		wait, where = v.copy.delay, retry.OnDelayQueues
	}
	what := "acemq: retry scheduled"
	if v.snooze {
		what = "acemq: snoozed"
	}
	if ce := c.e.log.Check(zap.InfoLevel, what); ce != nil {
		why := zap.Skip()
		if v.err != nil { // what the handler said: a 429 is not a 500
			why = zap.String("error", logging.Cut(v.err.Error(), retryErrorCap))
		}
		ce.Write(zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()),
			zap.Stringer("wait", wait), zap.Stringer("where", where), zap.String("to", v.copy.to), why)
	}
	if v.snooze {
		c.e.inst.snoozed.Add(context.Background(), 1, c.q.metrics.retries(v.where)...)
		return
	}
	c.e.inst.retries.Add(context.Background(), 1, c.q.metrics.retries(v.where)...)
}

// delayLevel names the level a delayed copy of queue's is first published
// to, for the log and the metric when it is missing.
func delayLevel(queue string, d time.Duration) string {
	r, err := delay.RouteTo(queue, d)
	if err != nil {
		return delay.Prefix
	}
	return r.Exchange
}

func (c *consumer) ack(d transport.Delivery, m *Message) {
	if err := d.Ack(); err != nil {
		c.e.log.Warn("acemq: ack failed; the broker will redeliver", zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.Error(err))
	}
}

func (c *consumer) giveBack(d transport.Delivery) {
	c.e.stop.gaveBack() // for the drain's line
	if err := d.Reject(true); err != nil {
		c.e.log.Debug("acemq: give back", zap.String("queue", c.q.name), zap.String("id", EnvelopeOf(d).ID), zap.Error(err))
	}
}
