package telemetry

import "go.opentelemetry.io/otel/attribute"

// The library's own span attributes, beside the semantic conventions': the
// server's process and copy spans, and Replay's.
const (
	AttrOutcome     = attribute.Key("acemq.outcome")      // what the server did: the outcome attribute of the metrics
	AttrAnswer      = attribute.Key("acemq.answer")       // what the handler answered (ack.Outcome)
	AttrAttempt     = attribute.Key("acemq.attempt")      // x-acemq-attempt, of the delivery or of the copy
	AttrRedelivered = attribute.Key("acemq.redelivered")  // the broker's redelivered flag
	AttrTo          = attribute.Key("acemq.to")           // the queue a copy is for
	AttrWhere       = attribute.Key("acemq.where")        // where a retry or snooze waits: process, broker, delays
	AttrWait        = attribute.Key("acemq.wait")         // how long, in seconds
	AttrReason      = attribute.Key("acemq.reason")       // x-acemq-error of a give-up
	AttrReplayFrom  = attribute.Key("acemq.replay.from")  // the queue a replayed copy was taken from
	AttrBreakerFrom = attribute.Key("acemq.breaker.from") // a breaker change's span: the state it left
	AttrBreakerTo   = attribute.Key("acemq.breaker.to")   // and the one it entered
	AttrBreakerWhy  = attribute.Key("acemq.breaker.why")  // and why
)

// The family's metric names, exact.
const (
	MetricDeadLettered   = "acemq.messages.dead.lettered.total"
	MetricSetAsideFailed = "acemq.messages.set.aside.failed"
	MetricRungMissing    = "acemq.retry.rung.missing"
	MetricHandled        = "acemq.messages.handled"
	MetricRetries        = "acemq.retry.scheduled"
	MetricDuration       = "acemq.handler.duration"
	MetricAge            = "acemq.message.age"
	MetricInFlight       = "acemq.messages.in.flight"
	MetricConfirmLatency = "acemq.publish.confirm.duration"
	MetricHeld           = "acemq.messages.held"
	MetricIDStamped      = "acemq.messages.id.stamped"
	MetricSnoozed        = "acemq.messages.snoozed"
	MetricDelayRedeliver = "acemq.delay.redelivered"
	MetricRefusals       = "acemq.connection.refusals"
	MetricBreaker        = "acemq.breaker.changes"
	MetricThrottleWait   = "acemq.throttle.wait"
	MetricUnconfirmed    = "acemq.publish.unconfirmed"
)
