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
)

// meterName is the instrumentation scope of every instrument here.
const meterName = "github.com/acemq/acemq"

type instruments struct {
	deadLettered   metric.Int64Counter
	setAsideFailed metric.Int64Counter
	rungMissing    metric.Int64Counter
	handled        metric.Int64Counter
	retries        metric.Int64Counter
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
		metric.WithDescription("Messages given up on, by outcome (exhausted, too_old, rejected, no_policy, parked)."))
	in.setAsideFailed, _ = m.Int64Counter(MetricSetAsideFailed,
		metric.WithDescription("Dead letters, parks and retries whose copy the broker refused; the original was rejected to the broker."))
	in.rungMissing, _ = m.Int64Counter(MetricRungMissing,
		metric.WithDescription("Broker waits that fell back to an in-process wait because the rung queue is missing."))
	in.handled, _ = m.Int64Counter(MetricHandled,
		metric.WithDescription("Messages handled, by queue and outcome."))
	in.retries, _ = m.Int64Counter(MetricRetries,
		metric.WithDescription("Retries scheduled, by where the wait happens (process, broker)."))
	return in
}

// queueMetrics holds the attribute options of one queue, built once so the
// hot path does not allocate them per message.
type queueMetrics struct {
	handled [5]metric.AddOption // by ack.Outcome
	queue   attribute.KeyValue
}

func newQueueMetrics(queue string) *queueMetrics {
	qm := &queueMetrics{queue: attribute.String("queue", queue)}
	for o := ack.OutcomeAccept; o <= ack.OutcomeRequeue; o++ {
		qm.handled[o] = metric.WithAttributeSet(attribute.NewSet(qm.queue, attribute.String("outcome", o.String())))
	}
	return qm
}

func (qm *queueMetrics) with(kvs ...attribute.KeyValue) metric.AddOption {
	return metric.WithAttributes(append(kvs, qm.queue)...)
}
