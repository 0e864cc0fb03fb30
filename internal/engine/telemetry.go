package engine

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/transport"
)

// tracing returns the server's tracer and propagator: its own, else the
// global ones, resolved once, at the first delivery or copy.
func (e *Engine) tracing() (trace.Tracer, telemetry.Propagation) {
	in := e.inst
	in.traceOnce.Do(func() {
		in.tracer = telemetry.Tracer(e.cfg.TracerProvider, meterName)
		in.prop = telemetry.Propagator(e.cfg.Propagator)
	})
	return in.tracer, in.prop
}

// startProcess starts the process span of one delivery, a child of the
// trace context its headers carry (its creation context, linked as well,
// as the conventions ask) or a new trace when they carry none. The server,
// not a middleware, owns it: it spans the handler and the settlement, and
// ends with what the server did (finish). Every copy the server publishes
// is a child of it and carries its context, so that the next attempt joins
// the trace.
func (c *consumer) startProcess(d transport.Delivery, m message) (context.Context, trace.Span) {
	tracer, prop := c.e.tracing()
	qm := c.q.metrics
	parent := prop.Extract(context.Background(), d.Headers)
	ctx, span := telemetry.Start(parent, tracer, qm.processName, qm.processStart...)
	if !span.IsRecording() {
		return ctx, span
	}
	env := m.env
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, semconv.MessagingMessageID(env.ID), semconv.MessagingMessageBodySize(len(d.Body)),
		telemetry.AttrAttempt.Int(env.Attempt), telemetry.AttrRedelivered.Bool(env.Redelivered))
	if dest := consumerDestination(env.Exchange, env.RoutingKey, c.q.name); dest != c.q.name {
		attrs = append(attrs, semconv.MessagingDestinationName(dest))
	}
	if env.RoutingKey != "" {
		attrs = append(attrs, semconv.MessagingRabbitMQDestinationRoutingKey(env.RoutingKey))
	}
	if env.CorrelationID != "" {
		attrs = append(attrs, semconv.MessagingMessageConversationID(env.CorrelationID))
	}
	span.SetAttributes(attrs...)
	if sc := trace.SpanContextFromContext(parent); sc.IsValid() {
		span.AddLink(trace.Link{SpanContext: sc})
	}
	return ctx, span
}

// consumerDestination is messaging.destination.name of a delivery from
// queue of a message first published to exchange with key, as RabbitMQ's
// conventions write it: "{exchange}:{routing key}:{queue}", without the
// empty ones, and with one of the key and the queue when they are the
// same. A message published to a queue by name is just the queue.
func consumerDestination(exchange, key, queue string) string {
	if exchange == "" && (key == "" || key == queue) {
		return queue
	}
	parts := make([]string, 0, 3)
	for _, p := range [...]string{exchange, key} {
		if p != "" && p != queue {
			parts = append(parts, p)
		}
	}
	return strings.Join(append(parts, queue), ":")
}

// answered notes the handler's answer on the process span.
func answered(span trace.Span, a ack.Ack) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.AttrAnswer.String(a.Outcome().String()))
	if err := a.Err(); err != nil {
		span.RecordError(err)
	}
}

// finish reports a delivery the server is done with, just before end
// acks, gives back or rejects the original: the metrics of its outcome o,
// and the end of its process span. A delivery held for a refused copy
// ended its span as held (endSpan) and is counted once it is settled.
func (c *consumer) finish(m message, v settling, o outcome) {
	c.e.stop.settled(o) // for the drain's line
	s := c.q.metrics.sets(o, v.cause)
	c.e.inst.handled.Add(v.ctx, 1, s.add...)
	if v.ran {
		c.e.inst.duration.Record(v.ctx, v.took.Seconds(), s.rec...)
	}
	c.e.inst.age.Record(v.ctx, ageOf(*m.env, c.e.clock.Now()).Seconds(), s.rec...)
	if !v.held { // else its span ended when it was held
		c.endSpan(v, o)
	}
}

// endSpan ends the process span of v with outcome o: what the server did
// and, for a copy, where it went, how long it waits or why it was given up.
func (c *consumer) endSpan(v settling, o outcome) {
	span := trace.SpanFromContext(v.ctx)
	if span.IsRecording() {
		s := c.q.metrics.sets(o, v.cause)
		attrs := make([]attribute.KeyValue, 0, 5)
		attrs = append(attrs, s.attr)
		if v.copy.to != "" && o != outcomeGivenBack {
			attrs = append(attrs, telemetry.AttrTo.String(v.copy.to))
			switch {
			case v.where != "":
				wait := v.copy.wait
				if v.where != "process" {
					wait = v.copy.delay
				}
				attrs = append(attrs, telemetry.AttrWhere.String(v.where), telemetry.AttrWait.Float64(wait.Seconds()))
			case v.copy.reason != "":
				attrs = append(attrs, telemetry.AttrReason.String(v.copy.reason))
			}
		}
		if o.failed() {
			attrs = append(attrs, semconv.ErrorTypeKey.String(s.attr.Value.AsString()))
			msg := s.attr.Value.AsString()
			if v.copy.reason != "" {
				msg = v.copy.reason
			}
			span.SetStatus(codes.Error, msg)
		}
		span.SetAttributes(attrs...)
	}
	span.End()
}

// outcomeOfCopy is the outcome of a verdict whose copy was placed.
func outcomeOfCopy(v verdict) outcome {
	switch {
	case v.cause != "":
		return giveUpOutcome(v.cause)
	case v.stamp:
		return outcomeStamped
	case v.snooze:
		return outcomeSnooze
	}
	return outcomeRetry
}

// note adds an event to the process span of ctx: something the
// settlement met on its way (a missing rung).
func note(ctx context.Context, name string, attrs ...attribute.KeyValue) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}
