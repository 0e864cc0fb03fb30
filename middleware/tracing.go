package middleware

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/wire"
)

// TracingOption configures Tracing.
type TracingOption interface{ apply(*tracingConfig) }

type tracingConfig struct {
	tp   trace.TracerProvider
	prop propagation.TextMapPropagator
}

// messageCarrier reads trace context straight from a message's headers,
// without copying them; extraction never writes.
type messageCarrier struct{ m *acemq.Message }

func (c messageCarrier) Get(key string) string {
	s, _ := wire.String(c.m.Header(key))
	return s
}

func (c messageCarrier) Set(string, string) {}

func (c messageCarrier) Keys() []string {
	h := c.m.Headers()
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

type tracingOptionFunc func(*tracingConfig)

func (f tracingOptionFunc) apply(c *tracingConfig) { f(c) }

// WithTracerProvider sets where spans go. Without one, Tracing is a no-op.
func WithTracerProvider(tp trace.TracerProvider) TracingOption {
	return tracingOptionFunc(func(c *tracingConfig) { c.tp = tp })
}

// WithPropagator sets how trace context is read from headers; the default is
// W3C trace context, the one the family writes.
func WithPropagator(p propagation.TextMapPropagator) TracingOption {
	return tracingOptionFunc(func(c *tracingConfig) { c.prop = p })
}

// Tracing starts a consumer span per message, a child of the trace context
// the message carries in its headers, with the OpenTelemetry messaging
// attributes and the attempt; the span ends with the Ack's outcome, and
// with an error status for anything but accept. Put it outermost, so the
// span covers the rest of the chain. The server's copies (retries, rungs,
// dead letters, parks) keep the message's trace context, so every attempt of
// a message lands in one trace. Without a provider it costs nothing: the
// handler is returned as it is.
func Tracing(opts ...TracingOption) acemq.Middleware {
	cfg := tracingConfig{prop: propagation.TraceContext{}}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.tp == nil {
		return func(next acemq.Handler) acemq.Handler { return next }
	}
	tracer := cfg.tp.Tracer("github.com/acemq/acemq/middleware")
	return func(next acemq.Handler) acemq.Handler {
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			env := m.Envelope()
			ctx = cfg.prop.Extract(ctx, messageCarrier{m})
			ctx, span := tracer.Start(ctx, env.Queue+" process",
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(
					attribute.String("messaging.system", "rabbitmq"),
					attribute.String("messaging.operation.type", "process"),
					attribute.String("messaging.destination.name", env.Queue),
					attribute.String("messaging.message.id", env.ID),
					attribute.String("messaging.rabbitmq.destination.routing_key", env.RoutingKey),
					attribute.Int("acemq.attempt", env.Attempt),
					attribute.Bool("acemq.redelivered", env.Redelivered),
				))
			defer span.End()
			a := next.ServeMessage(ctx, m)
			span.SetAttributes(attribute.String("acemq.outcome", a.Outcome().String()))
			if a.Outcome() != ack.OutcomeAccept {
				msg := a.Outcome().String()
				if a.Err() != nil {
					span.RecordError(a.Err())
					msg = a.Err().Error()
				}
				if a.Reason() != "" {
					span.SetAttributes(attribute.String("acemq.reason", a.Reason()))
				}
				span.SetStatus(codes.Error, msg)
			}
			return a
		})
	}
}
