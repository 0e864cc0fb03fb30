package middleware_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

func TestTracingJoinsTheProducersTrace(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	// A producer publishes inside a span; the context travels in the headers.
	broker := memory.New()
	defer broker.Close()
	conn := broker.Connect()
	defer conn.Close()
	ctx := context.Background()
	conn.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: "orders", Durable: true}}})
	pctx, producer := tp.Tracer("test").Start(ctx, "orders publish", trace.WithSpanKind(trace.SpanKindProducer))
	if _, err := (&acemq.Publisher{Transport: conn}).Publish(pctx, acemq.Outgoing{RoutingKey: "orders", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	producer.End()
	d := broker.Peek("orders")[0]
	if d.Headers["traceparent"] == nil {
		t.Fatalf("no traceparent in %v", d.Headers)
	}
	tests := []struct {
		answer ack.Ack
		status codes.Code
	}{
		{ack.Accept(), codes.Unset},
		{ack.Retry(errors.New("busy")), codes.Error},
		{ack.DeadLetter(errors.New("no such customer")), codes.Error},
	}
	for _, tt := range tests {
		h := middleware.Tracing(middleware.WithTracerProvider(tp))(acemq.HandlerFunc(func(ctx context.Context, _ *acemq.Message) ack.Ack {
			if !trace.SpanContextFromContext(ctx).IsValid() {
				t.Error("the handler's context has no span")
			}
			return tt.answer
		}))
		h.ServeMessage(ctx, acemq.NewMessage("orders", d.Body, d.Headers))
	}
	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	for i, s := range spans[1:] {
		if s.SpanKind() != trace.SpanKindConsumer || s.Parent().SpanID() != producer.SpanContext().SpanID() || s.SpanContext().TraceID() != producer.SpanContext().TraceID() {
			t.Errorf("span %d is not the producer's child: %v parent %v", i, s.Name(), s.Parent())
		}
		attrs := attribute.NewSet(s.Attributes()...)
		if v, _ := attrs.Value("messaging.destination.name"); v.AsString() != "orders" {
			t.Errorf("destination %v", v)
		}
		if v, _ := attrs.Value("acemq.outcome"); v.AsString() != tests[i].answer.Outcome().String() {
			t.Errorf("outcome %v", v)
		}
		if v, _ := attrs.Value("messaging.system"); v.AsString() != "rabbitmq" {
			t.Errorf("system %v", v)
		}
		if s.Status().Code != tests[i].status {
			t.Errorf("span %d status %v, want %v", i, s.Status(), tests[i].status)
		}
	}
}
