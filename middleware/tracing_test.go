package middleware_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/middleware"
)

// TestTracingIsANoOp: the deprecated middleware returns the handler and
// makes no span, whatever it is given: the server's process span is the
// one span of a delivery.
func TestTracingIsANoOp(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	h := middleware.Tracing(middleware.WithTracerProvider(tp), middleware.WithPropagator(nil))(acemq.HandlerFunc(accept))
	a := h.ServeMessage(context.Background(), acemq.NewMessage("orders", []byte("{}"), map[string]any{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}))
	if a.Outcome() != ack.OutcomeAccept {
		t.Errorf("answer %v, want accept", a)
	}
	if n := len(rec.Started()); n != 0 {
		t.Errorf("%d spans, want none", n)
	}
}
