package engine

import (
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// The broker's consumer timeout is learnt, not guessed. RabbitMQ takes a
// delivery back once it has stayed unacknowledged past consumer_timeout
// (the node's setting, 30 minutes by default; from 3.12 also a queue's
// x-consumer-timeout argument or policy), and no API tells a client the
// node's value on 3.10 (the management API does not show it). But the
// broker says it when it uses it: the channel.close names "Timeout value
// used: N ms", and the transport reports it (ConsumeOptions.
// OnConsumerTimeout). A queue declared with x-consumer-timeout says it up
// front. From either, the queue's handlers begin under a cap below the
// broker's timeout (capBelow), logged once per queue (again only if a
// lower one is learnt); handlers already running keep the timeout they
// began under.
//
// When the broker closes a channel for its timeout, every delivery being
// handled on it is stale: the broker redelivers each. A handler that has
// run at least the broker's timeout is marked overdue (its context ends,
// and its redelivery is dead-lettered with consumer_timeout); the answer
// of every handler of that channel is discarded when it returns, since
// settling it would ack nothing and could publish a copy of what the
// broker delivers again. Their redeliveries wait for them (awaitRunning):
// a delivery never runs twice at once in one server.

// handlerTimeout is the handler timeout a handler of c's queue begins
// under now: the server's HandlerTimeout, or the cap below the broker's
// consumer timeout once learnt, whichever is shorter; <= 0 for none.
func (c *consumer) handlerTimeout() time.Duration {
	d := c.e.handlerTimeout
	if b := c.e.overdue.brokerTimeout(c.q.name); b > 0 {
		if capped := capBelow(b); d <= 0 || capped < d {
			d = capped
		}
	}
	return d
}

// consumeOptions are the options q is consumed with: its prefetch,
// whether it is single-active-consumer (an ordered queue: no probation,
// whose second consumer would never be active), and the report of the
// broker's consumer timeouts. It first learns the
// timeout q's declaration states (x-consumer-timeout), so that a
// HandlerTimeout above it is warned of at start-up.
func (e *Engine) consumeOptions(q *queueRun) transport.ConsumeOptions {
	if d := declaredTimeout(q); d > 0 {
		e.learnt(q.name, d, "the queue's x-consumer-timeout argument")
	}
	return transport.ConsumeOptions{
		Prefetch:          q.prefetch,
		SingleActive:      q.args["x-single-active-consumer"] == true,
		OnConsumerTimeout: func(timeout time.Duration) { e.consumerTimedOut(q, timeout, time.Now()) },
	}
}

// declaredTimeout is the x-consumer-timeout (milliseconds) of q's
// arguments where the server declares q; 0 when none or not readable as
// a positive number. RabbitMQ applies the argument from 3.12 (3.11.15);
// before, the node's consumer_timeout applies: a cap below the argument
// still holds below what the user meant.
func declaredTimeout(q *queueRun) time.Duration {
	if !q.declare {
		return 0
	}
	arg := q.args["x-consumer-timeout"]
	switch arg.(type) {
	case string, []byte: // RabbitMQ takes a number only
		return 0
	}
	ms, ok := wire.Int(arg) // any integer or float type
	if !ok {
		return 0
	}
	if ms < 1 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// learnt records the broker's consumer timeout for queue and, when it
// lowers what was known, logs once what it does to the queue's handlers:
// a warning when it caps them below HandlerTimeout.
func (e *Engine) learnt(queue string, timeout time.Duration, from string) {
	if !e.overdue.learn(queue, timeout) {
		return
	}
	capped := capBelow(timeout)
	fields := []zap.Field{zap.String("queue", queue), zap.Stringer("consumer_timeout", timeout), zap.String("from", from),
		zap.Stringer("handler_timeout", e.handlerTimeout)}
	if e.handlerTimeout > 0 && e.handlerTimeout <= capped {
		e.log.Info("acemq: learnt the broker's consumer timeout for this queue; HandlerTimeout is below it", fields...)
		return
	}
	e.log.Warn("acemq: the broker's consumer timeout for this queue is below Server.HandlerTimeout (or there is none); from now on the queue's handlers end at the cap, before the broker takes their delivery back",
		append(fields, zap.Stringer("cap", capped))...)
}

// consumerTimedOut is the report of q's subscription that the broker
// closed its channel for its consumer timeout, which it says it used (0
// when it did not say). Every handler of q still running lost its
// delivery: each is marked taken back (its answer is discarded), and
// overdue when it has run at least that long, which cancels its context
// and dead-letters its redelivery. It runs on the transport's goroutine
// before the subscription consumes again, so before any redelivery.
func (e *Engine) consumerTimedOut(q *queueRun, timeout time.Duration, now time.Time) {
	if timeout > 0 {
		e.learnt(q.name, timeout, "the broker closed the consumer's channel")
	} else {
		e.log.Warn("acemq: the broker closed the consumer's channel for its consumer timeout without saying the timeout; the redeliveries of the handlers still running wait for them",
			zap.String("queue", q.name), zap.Stringer("handler_timeout", e.handlerTimeout))
	}
	c := e.overdue.consumerOf(q.name)
	if c == nil {
		return // no worker has started: nothing runs
	}
	for _, w := range c.workersNow() {
		e.markOverdue(q, w, now, timeout, true)
	}
	c.retaken() // a redelivery waiting (awaitRunning) was on that channel too
}

// markOverdue marks the handler running on w as overdue when it has run
// at least the broker's timeout: its context ends and its message is
// remembered, so that its redelivery is dead-lettered. With stale (the
// broker closed the channel) it also lost its delivery: its answer will
// be discarded.
func (e *Engine) markOverdue(q *queueRun, w *worker, now time.Time, timeout time.Duration, stale bool) {
	m, overdue, cancel := w.takeBack(now, timeout, stale)
	if !overdue {
		return
	}
	e.overdue.add(q.name, m, timeout)
	e.log.Warn("acemq: a handler ran past the broker's consumer timeout, which took its delivery back; its context is cancelled, and its message is dead-lettered when the broker delivers it again rather than run again",
		zap.String("queue", q.name), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()), zap.Stringer("timeout", timeout))
	cancel()
}
