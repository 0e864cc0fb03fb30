package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/outbox"
)

// TestRelayPublishSpan: the relay publishes each row under a producer
// span, a child of the trace context Write stored with it (a new trace
// for a row written with none), and the message carries the span's
// context in place of the stored one; a publish that reaches no queue
// says so.
func TestRelayPublishSpan(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		c := collect(t, f.tr, f.queue)
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

		ctx, writer := tp.Tracer("test").Start(context.Background(), "place order")
		var traced string
		if err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
			var err error
			traced, err = f.o.Write(ctx, tx, outbox.Message{Queue: f.queue, Body: []byte("1"), CorrelationID: "conv-1"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		writer.End()
		untraced := write(t, f.pool, f.o, outbox.Message{Queue: f.queue, Body: []byte("2")})[0]
		write(t, f.pool, f.o, outbox.Message{Queue: f.queue + ".nowhere", Body: []byte("3")})
		run(t, newRelay(t, f.o, f.tr, outbox.WithTracerProvider(tp), outbox.WithBackoff(time.Hour, time.Hour)))

		got := c.wait(t, 2, 10*time.Second)
		spans := map[string]sdktrace.ReadOnlySpan{} // by message id
		polltest.Until(polltest.Generous, func() bool {
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindProducer {
					spans[attrOf(s, "messaging.message.id").AsString()] = s
				}
			}
			return len(spans) >= 3
		})
		if len(spans) != 3 {
			t.Fatalf("%d producer spans, want 3", len(spans))
		}
		for _, d := range got {
			id := header(d, "x-acemq-id")
			s := spans[id]
			if want := fmt.Sprintf("00-%s-%s-01", s.SpanContext().TraceID(), s.SpanContext().SpanID()); header(d, "traceparent") != want {
				t.Errorf("message %s carries traceparent %q, want its publish span's %s", id, header(d, "traceparent"), want)
			}
		}
		s := spans[traced]
		if s.Name() != "publish "+f.queue || s.Parent().SpanID() != writer.SpanContext().SpanID() || s.SpanContext().TraceID() != writer.SpanContext().TraceID() {
			t.Errorf("the written-in-a-span row's publish: %q, parent %v", s.Name(), s.Parent())
		}
		for key, want := range map[string]any{
			"messaging.system":                           "rabbitmq",
			"messaging.operation.name":                   "publish",
			"messaging.operation.type":                   "send",
			"messaging.destination.name":                 f.queue,
			"messaging.rabbitmq.destination.routing_key": f.queue,
			"messaging.message.conversation_id":          "conv-1",
			"messaging.message.body.size":                int64(1),
			"acemq.outbox.table":                         f.o.Table(),
		} {
			if got := attrOf(s, key).AsInterface(); got != want {
				t.Errorf("%s = %v, want %v", key, got, want)
			}
		}
		if p := spans[untraced].Parent(); p.IsValid() {
			t.Errorf("a row written with no trace context: publish span's parent %v", p)
		}
		for id, s := range spans {
			unroutable := id != traced && id != untraced
			if failed := s.Status().Code == codes.Error; failed != unroutable || (failed && attrOf(s, "error.type").AsString() != "unroutable") {
				t.Errorf("span of %s: status %v, error.type %v", id, s.Status(), attrOf(s, "error.type"))
			}
		}
	})
}

func attrOf(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}
