package acemq

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// settle carries out the handler's answer for one delivery.
func (c *consumer) settle(d transport.Delivery, m *Message, a ack.Ack) {
	switch a.Outcome() {
	case ack.OutcomeAccept:
		c.ack(d)
	case ack.OutcomeRequeue:
		c.giveBack(d)
	case ack.OutcomeRetry:
		c.retry(d, m, a.Err())
	case ack.OutcomePark:
		c.setAside(d, m, a, ParkedQueue(c.name))
	default:
		c.setAside(d, m, a, DeadLetterQueue(c.name))
	}
}

// retry asks the policy for the next wait: none left, no policy, too old or
// a fatal error dead-letters; otherwise the message waits in the process or
// on a rung, and is republished with its attempt raised.
func (c *consumer) retry(d transport.Delivery, m *Message, err error) {
	p := c.cfg.Retry
	switch {
	case ack.IsFatal(err):
		c.setAside(d, m, ack.DeadLetter(err), DeadLetterQueue(c.name))
		return
	case p.IsZero():
		c.setAside(d, m, ack.NoPolicy(err), DeadLetterQueue(c.name))
		return
	case p.TooOld(m.Age()):
		c.setAside(d, m, ack.TooOld(p.MaxAge(), err), DeadLetterQueue(c.name))
		return
	}
	w, ok := p.NextWait(m.Attempt(), m.Age())
	if !ok {
		c.setAside(d, m, ack.Exhausted(m.Attempt(), err), DeadLetterQueue(c.name))
		return
	}
	if w.InBroker && !c.cfg.NoDeclare {
		rung := retry.RungName(c.name, w.Delay)
		c.hop(m, d, rung, m.Attempt()+1, "", func(routed bool, outcome hopOutcome) {
			switch {
			case outcome == hopDone && routed:
				c.e.inst.retries.Add(context.Background(), 1, c.metrics.with(attribute.String("where", "broker")))
				c.ack(d)
			case outcome != hopDone:
				c.hopFailed(d, m, rung, outcome, nil)
			default:
				c.e.inst.rungMissing.Add(context.Background(), 1, c.metrics.with(attribute.String("rung", rung)))
				c.e.log.Error("acemq: retry rung queue is missing, so this wait is held in the process instead, where a restart cuts it short. "+
					"Declare it: Transport.Declare(ctx, acemq.Topology(queue, policy, args)), or run the server with declare on (QueueConfig.NoDeclare false)",
					zap.String("queue", c.name), zap.String("rung", rung), zap.Duration("wait", w.Delay), zap.String("id", m.ID()))
				c.e.inst.retries.Add(context.Background(), 1, c.metrics.with(attribute.String("where", "process")))
				c.waitInProcess(d, m, w.Delay)
			}
		})
		return
	}
	c.e.inst.retries.Add(context.Background(), 1, c.metrics.with(attribute.String("where", "process")))
	c.waitInProcess(d, m, w.Delay)
}

// waitInProcess holds the delivery for delay, then republishes it to its
// queue with the attempt raised. A stop does not wait the delay out: the
// copy goes at once, so nothing is lost and the count is kept.
func (c *consumer) waitInProcess(d transport.Delivery, m *Message, delay time.Duration) {
	c.e.waits.Add(1)
	go func() {
		defer c.e.waits.Done()
		select {
		case <-c.e.clock.After(delay):
		case <-c.e.flushWaits:
		}
		routed, outcome := c.publishCopy(m, d, c.name, m.Attempt()+1, "")
		if outcome.passing() {
			routed, outcome = c.publishAgain(m, d, c.name, m.Attempt()+1, "", outcome)
		}
		c.finishHop(d, m, c.name, routed, outcome, nil)
	}()
}

// setAside publishes the message to its .dlq or .parked queue with the
// reason, then acks the original: the copy is safe, so the original is done.
func (c *consumer) setAside(d transport.Delivery, m *Message, a ack.Ack, dest string) {
	c.hop(m, d, dest, m.Attempt(), a.Reason(), func(routed bool, outcome hopOutcome) {
		c.finishHop(d, m, dest, routed, outcome, &a)
	})
}

// hop publishes the copy and hands the result to then. Two refusals may
// pass, and are tried again before they count:
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
// So the delivery is held, off the worker (prefetch bounds how many), and
// the copy published again with backoff: while blocked, until the alarm
// clears, the publish timeout passes or shutdown cuts it off; while nacked,
// up to nackRetries more times, after which the nack is the broker's
// answer. Meanwhile the workers go on with messages that need no publish.
func (c *consumer) hop(m *Message, d transport.Delivery, queue string, attempt int, reason string, then func(routed bool, outcome hopOutcome)) {
	routed, outcome := c.publishCopy(m, d, queue, attempt, reason)
	if !outcome.passing() {
		then(routed, outcome)
		return
	}
	what := "the broker is blocking publishes; holding the message until it clears"
	if outcome == hopRefused {
		what = "the broker nacked the copy; holding the message to publish it again"
	}
	c.e.log.Warn("acemq: "+what, zap.String("queue", c.name), zap.String("id", m.ID()), zap.String("to", queue))
	c.e.waits.Add(1)
	go func() {
		defer c.e.waits.Done()
		then(c.publishAgain(m, d, queue, attempt, reason, outcome))
	}()
}

// nackRetries is how many times a nacked copy is published again before
// the nack counts as a refusal. With the backoff of publishAgain the last
// try comes 2.5 s after the first nack, time enough for a quorum queue to
// elect a leader.
const nackRetries = 6

// publishAgain publishes a copy whose publish was blocked or nacked
// (outcome) again, with backoff, until it is neither, the publish timeout
// passes, nackRetries nacks more have come, or the drain gives up. Still
// blocked at the end, the outcome is unknown: the original goes back.
// Still nacked, it is refused.
func (c *consumer) publishAgain(m *Message, d transport.Delivery, queue string, attempt int, reason string, outcome hopOutcome) (bool, hopOutcome) {
	deadline := time.Now().Add(c.publishTimeout())
	nacks := 0
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if outcome == hopRefused {
			if nacks++; nacks > nackRetries {
				return false, hopRefused
			}
		}
		select {
		case <-time.After(wait):
		case <-c.e.abandon:
			return false, hopUnknown
		}
		var routed bool
		routed, outcome = c.publishCopy(m, d, queue, attempt, reason)
		if !outcome.passing() {
			return routed, outcome
		}
		if outcome == hopBlocked && time.Now().After(deadline) {
			return false, hopUnknown
		}
	}
}

func (c *consumer) finishHop(d transport.Delivery, m *Message, dest string, routed bool, outcome hopOutcome, a *ack.Ack) {
	if outcome != hopDone || !routed {
		if outcome == hopDone {
			outcome = hopRefused // confirmed but reached no queue
		}
		c.hopFailed(d, m, dest, outcome, a)
		return
	}
	if a != nil {
		c.e.inst.deadLettered.Add(context.Background(), 1, c.metrics.with(attribute.String("outcome", a.Cause())))
		c.e.log.Warn("acemq: message given up on", zap.String("queue", c.name), zap.String("id", m.ID()),
			zap.Int("attempt", m.Attempt()), zap.String("outcome", a.Cause()), zap.String("to", dest), zap.String("reason", a.Reason()))
	}
	c.ack(d)
}

// hopFailed handles a copy that was not safely delivered. Refused (nacked
// on every try, or reached no queue): reject the original without requeue,
// so the queue's own dead-lettering is the last resort, and count it.
// Unknown: give the original back; a duplicate, never a loss.
func (c *consumer) hopFailed(d transport.Delivery, m *Message, dest string, outcome hopOutcome, a *ack.Ack) {
	fields := []zap.Field{zap.String("queue", c.name), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()), zap.String("to", dest)}
	if a != nil {
		fields = append(fields, zap.String("reason", a.Reason()))
	}
	if outcome == hopUnknown {
		c.e.log.Warn("acemq: copy not confirmed; the original goes back to the broker", fields...)
		c.giveBack(d)
		return
	}
	c.e.inst.setAsideFailed.Add(context.Background(), 1, c.metrics.with(attribute.String("destination", dest)))
	c.e.log.Error("acemq: the broker refused the copy (is the queue missing?); the original is rejected to the broker", fields...)
	if err := d.Reject(false); err != nil {
		c.e.log.Debug("acemq: reject", zap.String("queue", c.name), zap.Error(err))
	}
}

func (c *consumer) ack(d transport.Delivery) {
	if err := d.Ack(); err != nil {
		c.e.log.Warn("acemq: ack failed; the broker will redeliver", zap.String("queue", c.name), zap.Error(err))
	}
}

type hopOutcome uint8

const (
	hopDone    hopOutcome = iota // confirmed; routed says whether a queue took it
	hopRefused                   // nacked
	hopUnknown                   // no confirm: channel closed, timeout, transport error
	hopBlocked                   // the broker blocks publishes: try again once it clears
)

// passing says whether the outcome may change if the copy is published
// again a little later.
func (o hopOutcome) passing() bool { return o == hopBlocked || o == hopRefused }

func (c *consumer) publishTimeout() time.Duration {
	if c.e.s.PublishTimeout > 0 {
		return c.e.s.PublishTimeout
	}
	return DefaultPublishTimeout
}

// publishCopy republishes m by queue name, mandatory, with the wire
// contract's headers and without the broker's own.
func (c *consumer) publishCopy(m *Message, d transport.Delivery, queue string, attempt int, reason string) (routed bool, outcome hopOutcome) {
	ctx, cancel := context.WithTimeout(context.Background(), c.publishTimeout())
	defer cancel()
	began := time.Now()
	conf, err := c.e.t.Publish(ctx, republishing(m, d, queue, attempt, reason))
	c.e.inst.confirm.Record(ctx, time.Since(began).Seconds(), c.metrics.queueSet)
	switch {
	case err == nil:
		return conf.Routed, hopDone
	case errors.Is(err, transport.ErrNacked):
		return false, hopRefused
	case errors.Is(err, transport.ErrBlocked):
		return false, hopBlocked
	default:
		c.e.log.Warn("acemq: republish", zap.String("queue", c.name), zap.String("to", queue), zap.Error(err))
		return false, hopUnknown
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// republishing builds the copy of m for queue.
func republishing(m *Message, d transport.Delivery, queue string, attempt int, reason string) transport.Publishing {
	h := make(map[string]any, len(m.headers)+6)
	for k, v := range m.headers {
		if !isBrokerOwned(k) {
			h[k] = v
		}
	}
	h[HeaderID] = m.env.ID
	h[HeaderAttempt] = int64(attempt)
	h[HeaderCreated] = m.env.CreatedAt.UnixMilli()
	h[HeaderExchange] = m.env.Exchange
	h[HeaderRoutingKey] = m.env.RoutingKey
	if reason != "" {
		h[HeaderError] = reason
	} else {
		delete(h, HeaderError)
	}
	props := d.Properties
	props.Expiration = "" // never a per-message TTL
	props.UserID = ""     // another user's id would be refused (406)
	props.DeliveryMode = 2
	if props.MessageID == "" {
		props.MessageID = m.env.ID
	}
	return transport.Publishing{RoutingKey: queue, Mandatory: true, Headers: h, Properties: props, Body: m.body}
}
