package middleware

import (
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
)

// The options below are the names [Idempotent]'s settings had before the
// logger and meter provider were given one way across acemq (see
// docs/internals.md, "Settings"). They are kept for one release, each the same as its
// new name.

// WithIdempotencyLogger is [WithLogger], for [Idempotent].
//
// Deprecated: use [WithLogger].
func WithIdempotencyLogger(log *zap.Logger) IdempotentOption { return WithLogger(log) }

// WithIdempotencyMeterProvider is [WithMeterProvider], for [Idempotent].
//
// Deprecated: use [WithMeterProvider].
func WithIdempotencyMeterProvider(mp metric.MeterProvider) IdempotentOption {
	return WithMeterProvider(mp)
}
