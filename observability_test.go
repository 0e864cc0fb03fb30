package acemq_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// tracedServer returns a handler wrapped in Tracing and the recorder of its
// spans.
func traced(h acemq.Handler) (acemq.Handler, *tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	return middleware.Tracing(middleware.WithTracerProvider(tp))(h), rec, tp
}

// publishInSpan publishes under a producer span and returns it.
func publishInSpan(t *testing.T, tp trace.TracerProvider, tr transport.Transport, queue string) trace.SpanContext {
	t.Helper()
	ctx, span := tp.Tracer("producer").Start(context.Background(), queue+" publish", trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	if _, err := (&acemq.Publisher{Transport: tr, Mandatory: true}).Publish(ctx, acemq.Outgoing{RoutingKey: queue, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	return span.SpanContext()
}

// consumerSpans counts the consumer spans that ended: one per attempt. The
// producer's span ends too, as soon as Publish returns, so it is not
// counted.
func consumerSpans(rec *tracetest.SpanRecorder) int {
	n := 0
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindConsumer {
			n++
		}
	}
	return n
}

// checkTrace asserts every consumer span is a child of the producer's span,
// one per attempt, with the messaging attributes.
func checkTrace(t *testing.T, rec *tracetest.SpanRecorder, producer trace.SpanContext, queue string, outcomes []string) {
	t.Helper()
	var consumers []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindConsumer {
			consumers = append(consumers, s)
		}
	}
	if len(consumers) != len(outcomes) {
		t.Fatalf("%d consumer spans, want %d", len(consumers), len(outcomes))
	}
	for i, s := range consumers {
		attrs := attribute.NewSet(s.Attributes()...)
		get := func(k string) attribute.Value { v, _ := attrs.Value(attribute.Key(k)); return v }
		if s.Parent().SpanID() != producer.SpanID() || s.SpanContext().TraceID() != producer.TraceID() {
			t.Errorf("attempt %d is not in the producer's trace", i+1)
		}
		if get("acemq.attempt").AsInt64() != int64(i+1) || get("acemq.outcome").AsString() != outcomes[i] ||
			get("messaging.destination.name").AsString() != queue || get("messaging.system").AsString() != "rabbitmq" {
			t.Errorf("attempt %d attributes %v", i+1, s.Attributes())
		}
	}
}

// TestObservabilityOfAMessageRetriedThenDeadLettered: a message retried
// twice then dead-lettered yields one trace and the family's metrics.
func TestObservabilityOfAMessageRetriedThenDeadLettered(t *testing.T) {
	t.Parallel()
	h, rec, tp := traced(always(ack.Retry(errBoom)))
	f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Second)}, map[string]acemq.Handler{"orders": h})
	producer := publishInSpan(t, tp, f.conn, "orders")
	f.eventually("attempt 1", func() bool { return consumerSpans(rec) == 1 })
	f.advance(1, time.Second)
	f.eventually("attempt 2", func() bool { return consumerSpans(rec) == 2 })
	f.advance(1, time.Second)
	f.only("orders.dlq")
	checkTrace(t, rec, producer, "orders", []string{"retry", "retry", "retry"})
	for _, c := range []struct {
		name  string
		attrs map[string]string
		want  int64
	}{
		{acemq.MetricHandled, map[string]string{"queue": "orders", "outcome": "retry"}, 3},
		{acemq.MetricRetries, map[string]string{"queue": "orders", "where": "process"}, 2},
		{acemq.MetricDeadLettered, map[string]string{"queue": "orders", "outcome": "exhausted"}, 1},
		{acemq.MetricSetAsideFailed, nil, 0},
		{acemq.MetricRungMissing, nil, 0},
	} {
		if got := f.counter(c.name, c.attrs); got != c.want {
			t.Errorf("%s%v = %d, want %d", c.name, c.attrs, got, c.want)
		}
	}
	if got := f.logs.FilterMessage("acemq: message given up on").FilterField(zapString("reason", "exhausted 3 attempts: the warehouse is not answering")).Len(); got != 1 {
		t.Errorf("%d give-up log lines with the reason, want 1", got)
	}
}

// TestTraceContinuesOnRabbitMQ: the headers carry the producer's trace
// through a real broker, and through a rung.
func TestTraceContinuesOnRabbitMQ(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	h, rec, tp := traced(&recorder{answer: func(m *acemq.Message) ack.Ack {
		if m.Attempt() == 1 {
			return ack.Retry(errBoom)
		}
		return ack.Accept()
	}})
	r.serve(r.tr, q, &acemq.Server{Retry: retry.Fixed(2, 200*time.Millisecond).WaitInBrokerFrom(100 * time.Millisecond)}, h)
	producer := publishInSpan(t, tp, r.tr, q)
	r.eventually("two attempts", func() bool { return consumerSpans(rec) == 2 })
	checkTrace(t, rec, producer, q, []string{"retry", "accept"})
}
