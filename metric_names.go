package acemq

import "github.com/acemq/acemq/internal/telemetry"

// The family's metric names, exact (docs/wire-contract.md, "Metrics").
const (
	MetricDeadLettered   = telemetry.MetricDeadLettered   // "acemq.messages.dead.lettered.total"
	MetricSetAsideFailed = telemetry.MetricSetAsideFailed // "acemq.messages.set.aside.failed"
	MetricRungMissing    = telemetry.MetricRungMissing    // "acemq.retry.rung.missing"
	MetricHandled        = telemetry.MetricHandled        // "acemq.messages.handled"
	MetricRetries        = telemetry.MetricRetries        // "acemq.retry.scheduled"
	MetricDuration       = telemetry.MetricDuration       // "acemq.handler.duration"
	MetricAge            = telemetry.MetricAge            // "acemq.message.age"
	MetricInFlight       = telemetry.MetricInFlight       // "acemq.messages.in.flight"
	MetricConfirmLatency = telemetry.MetricConfirmLatency // "acemq.publish.confirm.duration"
	MetricHeld           = telemetry.MetricHeld           // "acemq.messages.held"
	MetricIDStamped      = telemetry.MetricIDStamped      // "acemq.messages.id.stamped"
	MetricSnoozed        = telemetry.MetricSnoozed        // "acemq.messages.snoozed"
	MetricDelayRedeliver = telemetry.MetricDelayRedeliver // "acemq.delay.redelivered"
	MetricRefusals       = telemetry.MetricRefusals       // "acemq.connection.refusals"
	MetricBreaker        = telemetry.MetricBreaker        // "acemq.breaker.changes"
	MetricThrottleWait   = telemetry.MetricThrottleWait   // "acemq.throttle.wait"
	MetricUnconfirmed    = telemetry.MetricUnconfirmed    // "acemq.publish.unconfirmed"
)
