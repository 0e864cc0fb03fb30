package acemq

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/acemq/acemq/ack"
)

// The family's metric names, exact.
const (
	MetricDeadLettered   = "acemq.messages.dead.lettered.total"
	MetricSetAsideFailed = "acemq.messages.set.aside.failed"
	MetricRungMissing    = "acemq.retry.rung.missing"
	MetricHandled        = "acemq.messages.handled"
	MetricRetries        = "acemq.retry.scheduled"
	MetricDuration       = "acemq.handler.duration"
	MetricInFlight       = "acemq.messages.in.flight"
	MetricConfirmLatency = "acemq.publish.confirm.duration"
	MetricHeld           = "acemq.messages.held"
	MetricIDStamped      = "acemq.messages.id.stamped"
	MetricSnoozed        = "acemq.messages.snoozed"
	MetricDelayRedeliver = "acemq.delay.redelivered"
)

// meterName is the instrumentation scope of every instrument here.
const meterName = "github.com/acemq/acemq"

type instruments struct {
	deadLettered   metric.Int64Counter
	setAsideFailed metric.Int64Counter
	rungMissing    metric.Int64Counter
	handled        metric.Int64Counter
	retries        metric.Int64Counter
	duration       metric.Float64Histogram
	inFlight       metric.Int64UpDownCounter
	confirm        metric.Float64Histogram
	held           metric.Int64UpDownCounter
	stamped        metric.Int64Counter
	snoozed        metric.Int64Counter
	redelivered    metric.Int64Counter
}

func newInstruments(mp metric.MeterProvider) *instruments {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter(meterName)
	in := &instruments{}
	// Instrument creation fails only on an invalid name; ours are constants,
	// and a failed instrument is a no-op one, so the errors are not fatal.
	in.deadLettered, _ = m.Int64Counter(MetricDeadLettered,
		metric.WithDescription("Messages given up on, by outcome (exhausted, too_old, rejected, no_policy, parked, no_answer, unwritable, snooze_limit, wait_too_long)."))
	in.setAsideFailed, _ = m.Int64Counter(MetricSetAsideFailed,
		metric.WithDescription("Dead letters, parks and retries whose copy the broker refused (attribute why: missing, nacked, refused); the original is held and the copy tried again, or rejected to the queue's own dead-letter route."))
	in.rungMissing, _ = m.Int64Counter(MetricRungMissing,
		metric.WithDescription("Broker waits that fell back to an in-process wait because the rung queue or the delay queues' level (attribute rung) is missing."))
	in.handled, _ = m.Int64Counter(MetricHandled,
		metric.WithDescription("Messages handled, by queue and outcome."))
	in.retries, _ = m.Int64Counter(MetricRetries,
		metric.WithDescription("Retries scheduled, by where the wait happens (process, broker for a rung, delays for the delay queues)."))
	in.duration, _ = m.Float64Histogram(MetricDuration, metric.WithUnit("s"),
		metric.WithDescription("Time a handler (with its middleware) took, by queue and outcome."))
	in.inFlight, _ = m.Int64UpDownCounter(MetricInFlight,
		metric.WithDescription("Messages being handled now, by queue."))
	in.confirm, _ = m.Float64Histogram(MetricConfirmLatency, metric.WithUnit("s"),
		metric.WithDescription("Time from publish to the broker's confirm, for the library's own hops."))
	in.stamped, _ = m.Int64Counter(MetricIDStamped,
		metric.WithDescription("Messages with no id of their own, published again with one (ErrNeedsID) before a handler ran."))
	in.snoozed, _ = m.Int64Counter(MetricSnoozed,
		metric.WithDescription("Messages put off by their handler (ack.Snooze) without spending an attempt, by where the wait happens."))
	in.redelivered, _ = m.Int64Counter(MetricDelayRedeliver,
		metric.WithDescription("Due delayed messages whose destination was missing when they were due, sent again from acemq.delay.v1.undeliverable (attribute result: arrived, waiting)."))
	in.held, _ = m.Int64UpDownCounter(MetricHeld,
		metric.WithDescription("Originals held unacknowledged because the broker refused their copy, by destination and why; each holds a prefetch slot."))
	return in
}

// queueMetrics holds the attribute options of one queue, built once so the
// hot path does not allocate them per message: each is a slice already, so
// passing it on (opts...) allocates no variadic slice either.
type queueMetrics struct {
	handled  [ack.OutcomeSnooze + 1][]metric.AddOption    // by ack.Outcome
	duration [ack.OutcomeSnooze + 1][]metric.RecordOption // by ack.Outcome
	queueAdd []metric.AddOption
	queueRec []metric.RecordOption
	queue    attribute.KeyValue
	process  []metric.AddOption // retries waiting in the process
	broker   []metric.AddOption // retries waiting on a rung
	delays   []metric.AddOption // retries waiting on the delay queues
}

func newQueueMetrics(queue string) *queueMetrics {
	qm := &queueMetrics{queue: attribute.String("queue", queue)}
	queueSet := metric.WithAttributeSet(attribute.NewSet(qm.queue))
	qm.queueAdd, qm.queueRec = []metric.AddOption{queueSet}, []metric.RecordOption{queueSet}
	for o := ack.OutcomeNone; o <= ack.OutcomeSnooze; o++ {
		set := metric.WithAttributeSet(attribute.NewSet(qm.queue, attribute.String("outcome", o.String())))
		qm.handled[o], qm.duration[o] = []metric.AddOption{set}, []metric.RecordOption{set}
	}
	qm.process = []metric.AddOption{qm.with(attribute.String("where", "process"))}
	qm.broker = []metric.AddOption{qm.with(attribute.String("where", "broker"))}
	qm.delays = []metric.AddOption{qm.with(attribute.String("where", "delays"))}
	return qm
}

// retries is the attribute options of acemq.retry.scheduled for where.
func (qm *queueMetrics) retries(where string) []metric.AddOption {
	switch where {
	case "broker":
		return qm.broker
	case "delays":
		return qm.delays
	}
	return qm.process
}

func (qm *queueMetrics) with(kvs ...attribute.KeyValue) metric.AddOption {
	return metric.WithAttributes(append(kvs, qm.queue)...)
}
