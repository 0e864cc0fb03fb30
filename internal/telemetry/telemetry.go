// Package telemetry is the OpenTelemetry plumbing that the server, the
// publisher, replay and the outbox relay share: the providers and the
// propagator each uses when given none, the producer span of a publish,
// and the semantic conventions' names (messaging, v1.43.0).
package telemetry

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// SchemaURL is the semantic conventions' version every span and metric
// here follows.
const SchemaURL = semconv.SchemaURL

// Scope is the instrumentation scope of the root package's tracer and
// meter.
const Scope = "github.com/acemq/acemq"

// The operation names of the spans (messaging.operation.name). The span
// name is the operation name and the destination: "process orders",
// "publish orders.dlq".
const (
	OpProcess = "process"
	OpPublish = "publish"
)

// The attributes every span here starts with.
var (
	System      = semconv.MessagingSystemRabbitMQ
	ProcessName = semconv.MessagingOperationName(OpProcess)
	ProcessType = semconv.MessagingOperationTypeProcess
	PublishName = semconv.MessagingOperationName(OpPublish)
	SendType    = semconv.MessagingOperationTypeSend
)

// TracerProvider is tp, else the global one (otel.GetTracerProvider): a
// no-op until the program sets its own, and then that one.
func TracerProvider(tp trace.TracerProvider) trace.TracerProvider {
	if tp != nil {
		return tp
	}
	return otel.GetTracerProvider()
}

// MeterProvider is mp, else the global one (otel.GetMeterProvider).
func MeterProvider(mp metric.MeterProvider) metric.MeterProvider {
	if mp != nil {
		return mp
	}
	return otel.GetMeterProvider()
}

// Tracer is the tracer of scope from tp, else from the global provider;
// nil for a noop.TracerProvider, which turns tracing off: Start then
// costs nothing.
func Tracer(tp trace.TracerProvider, scope string) trace.Tracer {
	if _, off := tp.(noop.TracerProvider); off {
		return nil
	}
	tp = TracerProvider(tp)
	if reflect.TypeOf(tp).Kind() != reflect.Pointer { // only pointers are surely comparable
		return tp.Tracer(scope, schemaURL...)
	}
	if m := lastTracer.Load(); m != nil && m.tp == tp && m.scope == scope {
		return m.t
	}
	t := tp.Tracer(scope, schemaURL...)
	lastTracer.Store(&tracerMemo{tp: tp, scope: scope, t: t})
	return t
}

// tracerMemo is the tracer Tracer last returned: a provider's Tracer takes
// a lock and a map lookup, on every publish, for the same tracer.
type tracerMemo struct {
	tp    trace.TracerProvider
	scope string
	t     trace.Tracer
}

var lastTracer atomic.Pointer[tracerMemo]

// schemaURL is made once: options made per call are allocations per
// publish.
var schemaURL = []trace.TracerOption{trace.WithSchemaURL(SchemaURL)}

// Start starts a span with tracer, a child of ctx; with no tracer, it
// returns ctx and the span ctx holds (a remote parent's, or none).
func Start(ctx context.Context, tracer trace.Tracer, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	if s, ok := noSpanNeeded(ctx, tracer); ok { // unset.go
		return ctx, s
	}
	return tracer.Start(ctx, name, opts...)
}

// Propagation reads and writes trace context in message headers.
type Propagation struct {
	p      propagation.TextMapPropagator
	fields []string // what p writes, removed before it writes again
}

// Propagator is p, else the global propagator. otel's global propagator
// propagates nothing until the program sets one (otel.SetTextMapPropagator),
// and a message that carries no trace context breaks every trace that
// crosses it: while the global one writes no field, it is W3C trace
// context, which every member of the family writes and reads.
func Propagator(p propagation.TextMapPropagator) Propagation {
	if p == nil {
		p = otel.GetTextMapPropagator()
		if len(p.Fields()) == 0 {
			return w3c
		}
	}
	return Propagation{p: p, fields: p.Fields()}
}

// w3c is the default Propagation, made once: its fields are a slice made
// per call.
var w3c = Propagation{p: propagation.TraceContext{}, fields: propagation.TraceContext{}.Fields()}

// Extract returns ctx with the trace context headers carry, if any.
func (p Propagation) Extract(ctx context.Context, headers map[string]any) context.Context {
	if len(headers) == 0 {
		return ctx
	}
	return p.p.Extract(ctx, Headers(headers))
}

// Inject writes the trace context of ctx into headers in place of what
// they carried: the propagator's own headers are removed first, so that no
// stale tracestate rides along with a new traceparent. With no valid span
// in ctx, headers are left as they are: what a message carries is never
// dropped for nothing.
func (p Propagation) Inject(ctx context.Context, headers map[string]any) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	for _, f := range p.fields {
		delete(headers, f)
	}
	p.p.Inject(ctx, Headers(headers))
}

// Headers carries trace context in AMQP headers; a value that is not a
// string (or bytes) reads as "".
type Headers map[string]any

// Get returns the header's value as a string.
func (h Headers) Get(key string) string {
	s, _ := wire.String(h[key])
	return s
}

// Set sets a string header.
func (h Headers) Set(key, value string) { h[key] = value }

// Keys lists the header names.
func (h Headers) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// Destination is messaging.destination.name of a publish as RabbitMQ's
// conventions write it: "{exchange}:{routing key}", either alone when the
// other is empty, and "amq.default" for neither.
func Destination(exchange, key string) string {
	switch {
	case exchange != "" && key != "":
		return exchange + ":" + key
	case exchange != "":
		return exchange
	case key != "":
		return key
	}
	return "amq.default"
}

// SpanDestination is the destination a publish's span is named by: the
// exchange, or the queue a publish to the default exchange names. A span
// name must be of low cardinality, and a topic's routing key may carry
// ids.
func SpanDestination(exchange, key string) string {
	switch {
	case exchange != "":
		return exchange
	case key != "":
		return key
	}
	return "amq.default"
}

// Publish is what the producer span of one publish describes.
type Publish struct {
	Exchange, RoutingKey string
	ID, CorrelationID    string
	BodySize             int
}

// StartPublish starts the producer span of one publish, a child of ctx,
// named "publish {destination}", with the messaging attributes; extra
// are set on it too when it records.
func StartPublish(ctx context.Context, tracer trace.Tracer, p Publish, extra ...attribute.KeyValue) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	if s, ok := noSpanNeeded(ctx, tracer); ok { // unset.go
		return ctx, s
	}
	ctx, span := tracer.Start(ctx, OpPublish+" "+SpanDestination(p.Exchange, p.RoutingKey),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(System, PublishName, SendType,
			semconv.MessagingDestinationName(Destination(p.Exchange, p.RoutingKey))))
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := make([]attribute.KeyValue, 0, 4+len(extra))
	attrs = append(attrs, semconv.MessagingMessageID(p.ID), semconv.MessagingMessageBodySize(p.BodySize))
	if p.RoutingKey != "" {
		attrs = append(attrs, semconv.MessagingRabbitMQDestinationRoutingKey(p.RoutingKey))
	}
	if p.CorrelationID != "" {
		attrs = append(attrs, semconv.MessagingMessageConversationID(p.CorrelationID))
	}
	span.SetAttributes(append(attrs, extra...)...)
	return ctx, span
}

// Unroutable is the error.type of a publish the broker confirmed and no
// queue took.
const Unroutable = "unroutable"

// Fail marks span as failed with error.type typ (ErrorType(err) if
// empty) and records err.
func Fail(span trace.Span, typ string, err error) {
	if !span.IsRecording() {
		return
	}
	if typ == "" {
		typ = ErrorType(err)
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(typ))
	msg := typ
	if err != nil {
		span.RecordError(err)
		msg = err.Error()
	}
	span.SetStatus(codes.Error, msg)
}

// ErrorType is the error.type of a failed publish: the transport's
// outcome, in a few low-cardinality words, or "_OTHER".
func ErrorType(err error) string {
	switch {
	case errors.Is(err, transport.ErrNacked):
		return "nacked"
	case errors.Is(err, transport.ErrUnconfirmed):
		return "unconfirmed"
	case errors.Is(err, transport.ErrBlocked):
		return "blocked"
	case errors.Is(err, transport.ErrTooLarge):
		return "too_large"
	case errors.Is(err, transport.ErrNotFound):
		return "not_found"
	case errors.Is(err, transport.ErrClosed):
		return "closed"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}
