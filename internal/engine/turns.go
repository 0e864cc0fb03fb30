package engine

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/logging"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// turned carries out what a turn of the settlement owes besides the next
// publish: its log line, its metrics, a queue declared again. was is the
// plan the publish was made under, s the settlement with next's plan, r
// and err how the publish went. It returns s with what the turn noted on it.
func (c *consumer) turned(m message, s settling, was plan, t turn, r published, err error) settling {
	if was.holding && (!s.holding || s.settle != settleCopy) { // no longer held
		c.e.inst.held.Add(context.Background(), -1, c.heldAttrs(was.copy.to, s.why))
	}
	switch t {
	case turnPlaced:
		if was.holding {
			c.e.log.Info("acemq: a held copy was placed", append(c.hopFields(m, was.verdict), zap.Stringer("held_for", time.Since(s.heldSince)))...)
		}
		c.placed(m, s)
	case turnTooLarge:
		c.e.log.Error("acemq: the copy cannot be written; a trimmed copy is parked instead",
			append(c.hopFields(m, was.verdict), zap.String("parked_reason", s.copy.reason), zap.Error(err))...)
	case turnRungMissing, turnDelaysMissing:
		c.missing(m, s, was, t)
		c.count(m, s.verdict)
	case turnBlocked, turnNacked:
		if was.tries == 0 { // once, as the first publish fails
			what := "the broker is blocking publishes; holding the message until it clears"
			switch {
			case errors.Is(err, transport.ErrStalled):
				what = "the broker is stalled (it confirms no publish); holding the message until it answers again"
			case t == turnNacked:
				what = "the broker nacked the copy; holding the message to publish it again"
			}
			c.e.log.Warn("acemq: "+what, zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.String("to", s.copy.to))
		}
	case turnUnknown:
		if r != copyUnknown { // blocked or stalled for longer than the publish timeout: never sent
			c.e.log.Warn("acemq: the copy could not be sent within the publish timeout; the original goes back to the broker", append(c.hopFields(m, was.verdict), zap.Error(err))...)
			break
		}
		c.e.inst.unconfirmed.Add(s.ctx, 1, c.q.metrics.with(attribute.String("destination", was.copy.to)))
		c.e.log.Warn("acemq: copy not confirmed; the original goes back to the broker", append(c.hopFields(m, was.verdict), zap.Error(err))...)
	case turnForGood:
		c.refusedCopy(m, was.copy.to, err)
	case turnOwnRoute:
		why := c.setAsideFailed(s, was, r)
		c.e.log.Error("acemq: the broker refused the copy ("+why.detail+"); the original is rejected to the queue's own dead-letter route",
			append(c.hopFields(m, was.verdict), zap.String("why", why.why))...)
	case turnHeld:
		why := c.setAsideFailed(s, was, r)
		c.e.log.Error("acemq: the broker refused the copy ("+why.detail+"); the original is held unacknowledged and the copy tried again until it is placed",
			append(c.hopFields(m, was.verdict), zap.String("why", why.why))...)
		// The process span ends here, as held: a copy may stay refused
		// for hours. How the original ends is counted when it does.
		c.endSpan(s, outcomeHeld)
		s.held, s.why, s.heldSince = true, why.why, time.Now()
		c.e.inst.held.Add(context.Background(), 1, c.heldAttrs(s.copy.to, s.why))
	case turnHookFailed:
		c.e.log.Error("acemq: what the handler asked to run before the dead letter failed; the original is held unacknowledged and both are tried again until they succeed",
			append(c.hopFields(m, was.verdict), zap.Error(err))...)
		c.endSpan(s, outcomeHeld)
		s.held, s.why, s.heldSince = true, "before-dead-letter", time.Now()
		c.e.inst.held.Add(context.Background(), 1, c.heldAttrs(s.copy.to, s.why))
	case turnStillHeld:
		if s.tries%10 == 0 {
			c.e.log.Warn("acemq: a copy is still refused; the original stays held", append(c.hopFields(m, s.verdict),
				zap.String("why", s.why), zap.Time("held_since", s.heldSince), zap.Stringer("held_for", time.Since(s.heldSince)))...)
		}
	case turnTakenBack:
		c.e.log.Warn("acemq: the broker took the original back while its copy waited here (its consumer_timeout closed the channel); the copy is not published, as the broker delivers the message again",
			c.hopFields(m, was.verdict)...)
	case turnStopped:
		fields := c.hopFields(m, was.verdict)
		if was.holding {
			fields = append(fields, zap.Stringer("held_for", time.Since(s.heldSince)))
		}
		c.e.log.Warn("acemq: stopping; the original goes back to the broker, its copy not placed", fields...)
	}
	return s
}

// placed counts and logs a copy the broker took, by what it was for.
func (c *consumer) placed(m message, s settling) {
	switch {
	case s.cause != "":
		c.e.inst.deadLettered.Add(s.ctx, 1, c.q.metrics.sets(s.outcome, s.cause).add...)
		c.e.log.Warn("acemq: message given up on", zap.String("queue", c.q.name), zap.String("id", m.ID()),
			zap.Int("attempt", m.Attempt()), zap.String("outcome", s.cause), zap.String("to", s.copy.to), zap.String("reason", s.copy.reason))
	case s.where == "broker" || s.where == "delays":
		c.count(m, s.verdict)
	case s.stamp:
		c.e.inst.stamped.Add(s.ctx, 1, c.q.metrics.queueAdd...)
		c.e.log.Info("acemq: a message with no id of its own was published again with one, so that its deliveries share it",
			zap.String("queue", c.q.name), zap.String("id", m.ID()))
	}
}

// missing counts, notes and logs a rung or delay level that reached no
// queue, and declares it again where the server may.
func (c *consumer) missing(m message, s settling, was plan, t turn) {
	name, what := was.copy.to, "acemq: retry rung queue is missing, so this wait is held in the process instead, where a restart cuts it short. "+
		"Declare it: Transport.Declare(ctx, acemq.Topology(queue, policy, args)), or run the server with declare on (QueueConfig.NoDeclare false)"
	if t == turnDelaysMissing {
		name, what = delayLevel(c.q.name, was.copy.delay), "acemq: the delay queues are missing, so this wait is held in the process instead, where a restart cuts it short. "+
			"Declare them: acemq topology --delays --apply, or run the server with declare on"
	}
	rung := attribute.String("rung", name)
	c.e.inst.rungMissing.Add(s.ctx, 1, c.q.metrics.with(rung))
	note(s.ctx, "acemq.rung.missing", rung)
	c.e.log.Error(what, zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.String("rung", name), zap.Stringer("wait", was.copy.delay))
	c.redeclare(name)
	if t == turnDelaysMissing {
		c.e.noticeDelayMissing(name)
	}
}

func (c *consumer) hopFields(m message, v verdict) []zap.Field {
	fields := []zap.Field{zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()), zap.String("to", v.copy.to)}
	if v.copy.reason != "" {
		fields = append(fields, zap.String("reason", v.copy.reason))
	}
	return fields
}

// heldAttrs are the attributes of acemq.messages.held and of
// acemq.messages.set.aside.failed: the copy's destination and why it was
// refused.
func (c *consumer) heldAttrs(to, why string) metric.AddOption {
	return c.q.metrics.with(attribute.String("destination", to), attribute.String("why", why))
}

// retryErrorCap bounds the error on a retry's log line: one line per
// attempt, and a wrapped error with its cause is well under a kilobyte.
const retryErrorCap = 1 << 10

// count counts a retry scheduled, by where it waits, or a snooze, and
// logs it with its wait, where it waits and, for a retry, its error.
func (c *consumer) count(m message, v verdict) {
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
