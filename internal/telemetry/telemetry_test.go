package telemetry

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/acemq/acemq/transport"
)

func TestDestination(t *testing.T) {
	t.Parallel()
	tests := []struct{ exchange, key, name, span string }{
		{"", "orders", "orders", "orders"},
		{"events", "order.placed", "events:order.placed", "events"},
		{"events", "", "events", "events"},
		{"", "", "amq.default", "amq.default"},
	}
	for _, tt := range tests {
		if got := Destination(tt.exchange, tt.key); got != tt.name {
			t.Errorf("Destination(%q, %q) = %q, want %q", tt.exchange, tt.key, got, tt.name)
		}
		if got := SpanDestination(tt.exchange, tt.key); got != tt.span {
			t.Errorf("SpanDestination(%q, %q) = %q, want %q", tt.exchange, tt.key, got, tt.span)
		}
	}
}

// TestInjectReplaces: the propagator's headers are replaced, not added
// to; with no span to write, what is there stays.
func TestInjectReplaces(t *testing.T) {
	t.Parallel()
	p := Propagator(propagation.TraceContext{})
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	h := map[string]any{"traceparent": []byte("00-old"), "tracestate": "vendor=1", "other": "kept"}
	p.Inject(context.Background(), h)
	if h["traceparent"] == nil || h["tracestate"] != "vendor=1" {
		t.Errorf("with no span, headers changed: %v", h)
	}
	p.Inject(trace.ContextWithSpanContext(context.Background(), sc), h)
	if want := fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID()); h["traceparent"] != want || h["tracestate"] != nil || h["other"] != "kept" {
		t.Errorf("headers %v, want traceparent %s and no tracestate", h, want)
	}
	if got := trace.SpanContextFromContext(p.Extract(context.Background(), h)); !got.Equal(sc.WithRemote(true)) {
		t.Errorf("extracted %v, want %v", got, sc)
	}
}

// TestPropagatorDefault: otel's default global propagator writes nothing,
// so W3C trace context is used in its place.
func TestPropagatorDefault(t *testing.T) {
	t.Parallel()
	if got := Propagator(nil).fields; len(got) == 0 {
		t.Errorf("no fields with the default global propagator: trace context would not cross the broker")
	}
}

func TestTracerOff(t *testing.T) {
	t.Parallel()
	if Tracer(noop.NewTracerProvider(), Scope) != nil {
		t.Error("a noop provider should turn tracing off")
	}
	ctx, span := Start(context.Background(), nil, "process q")
	if span.SpanContext().IsValid() || ctx != context.Background() {
		t.Error("Start with no tracer made a span")
	}
}

func TestErrorType(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		fmt.Errorf("x: %w", transport.ErrNacked): "nacked",
		transport.ErrUnconfirmed:                 "unconfirmed",
		transport.ErrTooLarge:                    "too_large",
		context.DeadlineExceeded:                 "timeout",
		errors.New("other"):                      "_OTHER",
	} {
		if got := ErrorType(err); got != want {
			t.Errorf("ErrorType(%v) = %q, want %q", err, got, want)
		}
	}
}
