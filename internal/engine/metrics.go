package engine

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq/acemq/internal/telemetry"
)

// meterName is the instrumentation scope of every instrument and span here.
const meterName = telemetry.Scope

// outcome is what the server did with one delivery, in the one vocabulary
// of the outcome attribute of acemq.messages.handled, acemq.handler.duration
// and acemq.message.age, of acemq.messages.dead.lettered.total (the
// give-ups) and of the process span's acemq.outcome. A give-up is named by
// its cause, the words the family's dead-letter metric has always used.
type outcome uint8

const (
	outcomeAccept    outcome = iota // acknowledged: the handler accepted it
	outcomeRetry                    // a retry copy placed, wherever it waits
	outcomeSnooze                   // a snooze copy placed (ack.Snooze)
	outcomeRequeue                  // given back, as the handler asked (ack.Requeue)
	outcomeStamped                  // published again with an id of its own (ErrNeedsID)
	outcomeGivenBack                // given back by the server: a copy whose fate is unknown, a stop while held, the shutdown deadline
	outcomeOwnRoute                 // its copy refused, rejected to the queue's own dead-letter route
	outcomeHeld                     // its copy refused, held unacknowledged and tried again: the span's end only; the metrics count how it ends
	// The give-ups, by cause: the copy is in .dlq, or .parked for parked
	// and unwritable.
	outcomeExhausted
	outcomeTooOld
	outcomeRejected
	outcomeNoPolicy
	outcomeParked
	outcomeNoAnswer
	outcomeUnwritable
	outcomeSnoozeLimit
	outcomeWaitTooLong
	outcomeConsumerTimeout
	outcomeGaveUp // a cause not listed above: the metrics carry the cause itself
	numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"accept", "retry", "snooze", "requeue", "stamped", "given_back", "own_dead_letter_route", "held",
	"exhausted", "too_old", "rejected", "no_policy", "parked", "no_answer", "unwritable",
	"snooze_limit", "wait_too_long", "consumer_timeout", "gave_up",
}

func (o outcome) String() string { return outcomeNames[min(o, numOutcomes-1)] }

// giveUp is the outcome of a give-up's cause; outcomeGaveUp for a cause
// the list does not know.
func giveUpOutcome(cause string) outcome {
	for o := outcomeExhausted; o < outcomeGaveUp; o++ {
		if outcomeNames[o] == cause {
			return o
		}
	}
	return outcomeGaveUp
}

// failed says whether the process span of a delivery that ended so has an
// error status: all but an accept, a snooze and a stamped copy, which are
// what was asked for.
func (o outcome) failed() bool {
	return o != outcomeAccept && o != outcomeSnooze && o != outcomeStamped
}

type instruments struct {
	deadLettered   metric.Int64Counter
	setAsideFailed metric.Int64Counter
	rungMissing    metric.Int64Counter
	unconfirmed    metric.Int64Counter
	handled        metric.Int64Counter
	retries        metric.Int64Counter
	duration       metric.Float64Histogram
	age            metric.Float64Histogram
	inFlight       metric.Int64UpDownCounter
	confirm        metric.Float64Histogram
	held           metric.Int64UpDownCounter
	stamped        metric.Int64Counter
	snoozed        metric.Int64Counter
	redelivered    metric.Int64Counter
	refusals       metric.Int64Counter
	breaker        metric.Int64Counter
	throttled      metric.Float64Histogram

	// The tracer and propagator, resolved once when first needed (tracing).
	traceOnce sync.Once
	tracer    trace.Tracer
	prop      telemetry.Propagation
}

// Bucket boundaries, in seconds: the semantic conventions' for a
// messaging operation's duration, and for a message's age from a tenth of
// a second to a week.
var (
	durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300}
	ageBuckets      = []float64{0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400, 604800}
)

// newInstruments makes the server's instruments from mp, or from the
// global meter provider (otel.GetMeterProvider) when mp is nil: a no-op
// until the program sets its own.
func newInstruments(mp metric.MeterProvider) *instruments {
	m := telemetry.MeterProvider(mp).Meter(meterName, metric.WithSchemaURL(telemetry.SchemaURL))
	in := &instruments{}
	// Instrument creation fails only on an invalid name; ours are constants,
	// and a failed instrument is a no-op one, so the errors are not fatal.
	in.deadLettered, _ = m.Int64Counter(telemetry.MetricDeadLettered, metric.WithUnit("{message}"),
		metric.WithDescription("Messages given up on, by queue and outcome, the cause (exhausted, too_old, rejected, no_policy, parked, no_answer, unwritable, snooze_limit, wait_too_long, consumer_timeout): the give-ups of acemq.messages.handled."))
	in.setAsideFailed, _ = m.Int64Counter(telemetry.MetricSetAsideFailed,
		metric.WithDescription("Dead letters, parks and retries whose copy the broker refused (attribute why: missing, nacked, refused); the original is held and the copy tried again, or rejected to the queue's own dead-letter route."))
	in.rungMissing, _ = m.Int64Counter(telemetry.MetricRungMissing,
		metric.WithDescription("Broker waits that fell back to an in-process wait because the rung queue or the delay queues' level (attribute rung) is missing; and, with attribute kind (queue or exchange), parts of the delay queues' layout the server's periodic check found missing."))
	in.handled, _ = m.Int64Counter(telemetry.MetricHandled, metric.WithUnit("{message}"),
		metric.WithDescription("Deliveries settled, by queue and outcome: what the server did (accept, retry, snooze, requeue, stamped, given_back, own_dead_letter_route, or the cause of a give-up)."))
	in.retries, _ = m.Int64Counter(telemetry.MetricRetries,
		metric.WithDescription("Retries scheduled, by where the wait happens (process, broker for a rung, delays for the delay queues)."))
	in.duration, _ = m.Float64Histogram(telemetry.MetricDuration, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...),
		metric.WithDescription("Time a handler (with its middleware) took, by queue and the outcome of its delivery."))
	in.age, _ = m.Float64Histogram(telemetry.MetricAge, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(ageBuckets...),
		metric.WithDescription("Age of a message when the server settled its delivery, from x-acemq-created (its first publish, kept across retries) by the server's clock, by queue and outcome: end to end, waits included."))
	in.inFlight, _ = m.Int64UpDownCounter(telemetry.MetricInFlight,
		metric.WithDescription("Messages being handled now, by queue."))
	in.confirm, _ = m.Float64Histogram(telemetry.MetricConfirmLatency, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...),
		metric.WithDescription("Time from publish to the broker's confirm, for the library's own hops."))
	in.unconfirmed, _ = m.Int64Counter(telemetry.MetricUnconfirmed,
		metric.WithDescription("Copies the server published whose outcome is unknown (no confirm came: the publish timeout, a channel or connection lost, a stalled broker), by queue and destination; the original went back to the broker, so each may be delivered twice."))
	in.stamped, _ = m.Int64Counter(telemetry.MetricIDStamped,
		metric.WithDescription("Messages with no id of their own, published again with one (ErrNeedsID) before a handler ran."))
	in.snoozed, _ = m.Int64Counter(telemetry.MetricSnoozed,
		metric.WithDescription("Messages put off by their handler (ack.Snooze) without spending an attempt, by where the wait happens."))
	in.redelivered, _ = m.Int64Counter(telemetry.MetricDelayRedeliver,
		metric.WithDescription("Due delayed messages whose destination was missing when they were due, sent again from acemq.delay.v1.undeliverable (attribute result: arrived, waiting)."))
	in.refusals, _ = m.Int64Counter(telemetry.MetricRefusals, metric.WithUnit("{refusal}"),
		metric.WithDescription("Connection attempts of a queue's consumer that the broker refused for now, by queue and reason (connection_limit, user_connection_limit, node_connection_limit, vhost_down, node_not_accepting); each is dialled again with backoff, and Run goes on."))
	in.breaker, _ = m.Int64Counter(telemetry.MetricBreaker, metric.WithUnit("{change}"),
		metric.WithDescription("Changes of a queue's circuit breaker, by queue and the state it changed to (open, half-open, closed)."))
	in.throttled, _ = m.Float64Histogram(telemetry.MetricThrottleWait, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(durationBuckets...),
		metric.WithDescription("Time a handler's start waited for a throttle, by queue, throttle and limit (rate, concurrency); only waits are recorded."))
	in.held, _ = m.Int64UpDownCounter(telemetry.MetricHeld,
		metric.WithDescription("Originals held unacknowledged because the broker refused their copy, by destination and why; each holds a prefetch slot."))
	return in
}

// queueMetrics holds the attribute options and span settings of one
// queue, built once so the hot path does not allocate them per message:
// each option is a slice already, so passing it on (opts...) allocates no
// variadic slice either.
type queueMetrics struct {
	outcomes [numOutcomes]outcomeSets
	queueAdd []metric.AddOption
	queueRec []metric.RecordOption
	queue    attribute.KeyValue
	process  []metric.AddOption // retries waiting in the process
	broker   []metric.AddOption // retries waiting on a rung
	delays   []metric.AddOption // retries waiting on the delay queues

	// The process span: its name ("process orders") and the options it
	// starts with for a message first published to the queue by name.
	processName  string
	processStart []trace.SpanStartOption
}

// outcomeSets are the attribute options of one queue and outcome.
type outcomeSets struct {
	add  []metric.AddOption
	rec  []metric.RecordOption
	attr attribute.KeyValue // acemq.outcome, for the span
}

func newQueueMetrics(queue string) *queueMetrics {
	qm := &queueMetrics{queue: attribute.String("queue", queue)}
	queueSet := metric.WithAttributeSet(attribute.NewSet(qm.queue))
	qm.queueAdd, qm.queueRec = []metric.AddOption{queueSet}, []metric.RecordOption{queueSet}
	for o := range numOutcomes {
		qm.outcomes[o] = qm.outcomeSets(o.String())
	}
	qm.process = []metric.AddOption{qm.with(attribute.String("where", "process"))}
	qm.broker = []metric.AddOption{qm.with(attribute.String("where", "broker"))}
	qm.delays = []metric.AddOption{qm.with(attribute.String("where", "delays"))}
	qm.processName = telemetry.OpProcess + " " + queue
	qm.processStart = []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(telemetry.System, telemetry.ProcessName, telemetry.ProcessType, semconv.MessagingDestinationName(queue)),
	}
	return qm
}

func (qm *queueMetrics) outcomeSets(name string) outcomeSets {
	set := metric.WithAttributeSet(attribute.NewSet(qm.queue, attribute.String("outcome", name)))
	return outcomeSets{add: []metric.AddOption{set}, rec: []metric.RecordOption{set}, attr: telemetry.AttrOutcome.String(name)}
}

// sets returns the attribute options of outcome o, or of the give-up
// cause when o is outcomeGaveUp (built on the spot: no such cause exists
// today).
func (qm *queueMetrics) sets(o outcome, cause string) outcomeSets {
	if o == outcomeGaveUp && cause != "" {
		return qm.outcomeSets(cause)
	}
	return qm.outcomes[min(o, numOutcomes-1)]
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
