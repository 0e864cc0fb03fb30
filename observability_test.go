package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// tracing returns a tracer provider that records every span, shut down
// when the test ends.
func tracing(t testing.TB) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return rec, tp
}

// named returns the ended spans called name, in the order they started.
func named(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	return out
}

// started counts the spans called name that started, ended or not.
func started(rec *tracetest.SpanRecorder, name string) int {
	n := 0
	for _, s := range rec.Started() {
		if s.Name() == name {
			n++
		}
	}
	return n
}

// attr returns a span's attribute, the zero value when it has none.
func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// publishRaw publishes as a foreign producer would: straight to the
// transport, with an id and no trace context.
func publishRaw(t *testing.T, tr transport.Transport, queue, id string) {
	t.Helper()
	p := transport.Publishing{RoutingKey: queue, Mandatory: true, Body: []byte("{}"),
		Headers: map[string]any{acemq.HeaderID: id, acemq.HeaderAttempt: int64(1)}}
	if _, err := tr.Publish(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// traceparent is the W3C header of a span context.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// TestFiveAttemptsOneTrace is issue 17's trace: a message published with
// no trace context, retried four times and dead-lettered as exhausted,
// is one trace of five process spans. Each retry's copy is published
// under a producer span, a child of the attempt's process span, and
// carries that span's context, so the next attempt's process span is its
// child; the last one ends with what the server did, not what the handler
// said.
func TestFiveAttemptsOneTrace(t *testing.T) {
	t.Parallel()
	rec, tp := tracing(t)
	f := start(t, &acemq.Server{Retry: retry.Fixed(5, time.Second), TracerProvider: tp},
		map[string]acemq.Handler{"orders": always(ack.Retry(errBoom))})
	publishRaw(t, f.conn, "orders", "order-1")
	for k := 1; k < 5; k++ {
		f.eventually(fmt.Sprintf("attempt %d", k), func() bool { return started(rec, "process orders") == k })
		f.advance(1, time.Second)
	}
	dead := f.only("orders.dlq")
	f.eventually("five process spans ended", func() bool { return len(named(rec, "process orders")) == 5 })

	process := named(rec, "process orders")
	copies := named(rec, "publish orders")
	if len(copies) != 4 {
		t.Fatalf("%d producer spans of retries, want 4", len(copies))
	}
	traceID := process[0].SpanContext().TraceID()
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() != traceID {
			t.Errorf("span %q is in trace %s, not %s", s.Name(), s.SpanContext().TraceID(), traceID)
		}
	}
	if process[0].Parent().IsValid() {
		t.Errorf("attempt 1 has a parent %v; it published no context", process[0].Parent())
	}
	for i, s := range process {
		if s.SpanKind() != trace.SpanKindConsumer {
			t.Errorf("span %d: kind %v", i, s.SpanKind())
		}
		if got := attr(s, "acemq.attempt").AsInt64(); got != int64(i+1) {
			t.Errorf("span %d: attempt %d", i, got)
		}
		if got := attr(s, "acemq.answer").AsString(); got != "retry" {
			t.Errorf("span %d: answer %q, want retry", i, got)
		}
		if i == 0 {
			continue
		}
		hop := copies[i-1]
		if s.Parent().SpanID() != hop.SpanContext().SpanID() || hop.Parent().SpanID() != process[i-1].SpanContext().SpanID() {
			t.Errorf("attempt %d is not the child of attempt %d's copy", i+1, i)
		}
		if len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID() != hop.SpanContext().SpanID() {
			t.Errorf("attempt %d links %v, want its creation context", i+1, s.Links())
		}
		prev := process[i-1]
		if attr(prev, "acemq.outcome").AsString() != "retry" || attr(prev, "acemq.where").AsString() != "process" ||
			attr(prev, "acemq.wait").AsFloat64() != 1 || attr(prev, "acemq.to").AsString() != "orders" {
			t.Errorf("attempt %d attributes %v", i, prev.Attributes())
		}
		if attr(hop, "acemq.attempt").AsInt64() != int64(i+1) || hop.SpanKind() != trace.SpanKindProducer {
			t.Errorf("copy %d: %v %v", i, hop.SpanKind(), hop.Attributes())
		}
	}
	last := process[4]
	if got := attr(last, "acemq.outcome").AsString(); got != "exhausted" {
		t.Errorf("the last span's outcome is %q, want exhausted", got)
	}
	if last.Status().Code != codes.Error || attr(last, "error.type").AsString() != "exhausted" ||
		!strings.HasPrefix(attr(last, "acemq.reason").AsString(), "exhausted 5 attempts") || attr(last, "acemq.to").AsString() != "orders.dlq" {
		t.Errorf("the last span: status %v, attributes %v", last.Status(), last.Attributes())
	}
	dlq := named(rec, "publish orders.dlq")
	if len(dlq) != 1 || dlq[0].Parent().SpanID() != last.SpanContext().SpanID() {
		t.Fatalf("dead letter's producer spans %v", dlq)
	}
	if got, want := dead.Headers["traceparent"], traceparent(dlq[0].SpanContext()); got != want {
		t.Errorf("the dead letter carries traceparent %v, want %s", got, want)
	}
	f.counterReaches(acemq.MetricDeadLettered, map[string]string{"queue": "orders", "outcome": "exhausted"}, 1)
	f.eventually("handled: four retries and one exhausted", func() bool {
		return f.counter(acemq.MetricHandled, map[string]string{"outcome": "retry"}) == 4 &&
			f.counter(acemq.MetricHandled, map[string]string{"outcome": "exhausted"}) == 1
	})
	if got := f.logs.FilterMessage("acemq: message given up on").FilterField(zapString("outcome", "exhausted")).Len(); got != 1 {
		t.Errorf("%d give-up log lines with outcome exhausted, want 1", got)
	}
}

// TestProcessSpanConventions: the names and attributes of the current
// messaging semantic conventions, on the producer span of Publish and the
// process span it is the parent of.
func TestProcessSpanConventions(t *testing.T) {
	t.Parallel()
	rec, tp := tracing(t)
	f := start(t, &acemq.Server{TracerProvider: tp}, map[string]acemq.Handler{"orders": always(ack.Accept())})
	ctx, caller := tp.Tracer("test").Start(context.Background(), "place order")
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true, TracerProvider: tp}
	res, err := pub.Publish(ctx, acemq.Outgoing{RoutingKey: "orders", Body: []byte(`{"id":1}`), CorrelationID: "conv-7"})
	caller.End()
	if err != nil {
		t.Fatal(err)
	}
	f.eventually("processed", func() bool { return len(named(rec, "process orders")) == 1 })
	producer, process := named(rec, "publish orders")[0], named(rec, "process orders")[0]
	if producer.SpanKind() != trace.SpanKindProducer || producer.Parent().SpanID() != caller.SpanContext().SpanID() {
		t.Errorf("publish span: kind %v, parent %v", producer.SpanKind(), producer.Parent())
	}
	if process.SpanKind() != trace.SpanKindConsumer || process.Parent().SpanID() != producer.SpanContext().SpanID() {
		t.Errorf("process span: kind %v, parent %v", process.SpanKind(), process.Parent())
	}
	for _, c := range []struct {
		span  sdktrace.ReadOnlySpan
		key   string
		value any
	}{
		{producer, "messaging.system", "rabbitmq"},
		{producer, "messaging.operation.name", "publish"},
		{producer, "messaging.operation.type", "send"},
		{producer, "messaging.destination.name", "orders"},
		{producer, "messaging.rabbitmq.destination.routing_key", "orders"},
		{producer, "messaging.message.id", res.ID},
		{producer, "messaging.message.conversation_id", "conv-7"},
		{producer, "messaging.message.body.size", int64(8)},
		{process, "messaging.system", "rabbitmq"},
		{process, "messaging.operation.name", "process"},
		{process, "messaging.operation.type", "process"},
		{process, "messaging.destination.name", "orders"},
		{process, "messaging.rabbitmq.destination.routing_key", "orders"},
		{process, "messaging.message.id", res.ID},
		{process, "messaging.message.conversation_id", "conv-7"},
		{process, "messaging.message.body.size", int64(8)},
		{process, "acemq.attempt", int64(1)},
		{process, "acemq.outcome", "accept"},
		{process, "acemq.answer", "accept"},
	} {
		if got := attr(c.span, c.key).AsInterface(); got != c.value {
			t.Errorf("%s: %s = %v, want %v", c.span.Name(), c.key, got, c.value)
		}
	}
	if process.Status().Code != codes.Unset {
		t.Errorf("an accepted message's span has status %v", process.Status())
	}
}

// TestPublishSpanReplacesTraceContext: Publish writes its own span's
// context in place of trace context passed on in the headers (one
// traceparent, no stale tracestate), and links to what it replaced; a
// publish that fails says why.
func TestPublishSpanReplacesTraceContext(t *testing.T) {
	t.Parallel()
	rec, tp := tracing(t)
	broker, conn := bare(t)
	if err := conn.Declare(context.Background(), acemq.Topology("orders", retry.Policy{}, nil)); err != nil {
		t.Fatal(err)
	}
	pub := &acemq.Publisher{Transport: conn, TracerProvider: tp}
	stale := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "orders", Body: []byte("{}"),
		Headers: map[string]any{"traceparent": stale, "tracestate": "vendor=1"}}); err != nil {
		t.Fatal(err)
	}
	span := named(rec, "publish orders")[0]
	got := broker.Peek("orders")[0].Headers
	if got["traceparent"] != traceparent(span.SpanContext()) || got["tracestate"] != nil {
		t.Errorf("headers carry traceparent %v tracestate %v, want the span's %s and none", got["traceparent"], got["tracestate"], traceparent(span.SpanContext()))
	}
	if len(span.Links()) != 1 || span.Links()[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("links %v, want the replaced context", span.Links())
	}

	// To an exchange: named by the exchange, the destination with the key.
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{Exchange: "amq.topic", RoutingKey: "order.placed", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if s := named(rec, "publish amq.topic"); len(s) != 1 || attr(s[0], "messaging.destination.name").AsString() != "amq.topic:order.placed" || s[0].Status().Code != codes.Unset {
		t.Errorf("publish to an exchange: %v", s)
	}

	// Mandatory, to no queue: unroutable.
	pub.Mandatory = true
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "nowhere", Body: []byte("{}")}); !errors.Is(err, acemq.ErrUnroutable) {
		t.Fatalf("publish to no queue: %v", err)
	}
	s := named(rec, "publish nowhere")
	if len(s) != 1 || s[0].Status().Code != codes.Error || attr(s[0], "error.type").AsString() != "unroutable" {
		t.Errorf("unroutable publish: %v", s)
	}
}

// TestProcessSpanOfRefusedAndMissing: a dead letter whose .dlq is gone
// ends its span as held, and is counted once its copy is placed; a retry
// whose rung is gone waits in the process, and its span says so.
func TestProcessSpanOfRefusedAndMissing(t *testing.T) {
	t.Parallel()
	t.Run("held", func(t *testing.T) {
		t.Parallel()
		rec, tp := tracing(t)
		f := start(t, &acemq.Server{TracerProvider: tp}, map[string]acemq.Handler{"q": answerSeq(ack.DeadLetter(errors.New("no such customer")))})
		f.broker.DeleteQueue("q.dlq")
		f.publish("q", "{}", nil)
		f.eventuallyWithin(10*time.Second, "placed", func() bool { return f.broker.Depth("q.dlq") == 1 })
		process := named(rec, "process q")
		if len(process) != 1 || attr(process[0], "acemq.outcome").AsString() != "held" || process[0].Status().Code != codes.Error {
			t.Fatalf("process spans %v", process)
		}
		f.eventually("counted as rejected", func() bool { return f.counter(acemq.MetricHandled, map[string]string{"outcome": "rejected"}) == 1 })
		if got := f.counter(acemq.MetricHandled, map[string]string{"outcome": "held"}); got != 0 {
			t.Errorf("handled{held} = %d; held is not how a delivery ends", got)
		}
		copies := named(rec, "publish q.dlq")
		if len(copies) < 2 || attr(copies[0], "error.type").AsString() != "unroutable" || copies[len(copies)-1].Status().Code != codes.Unset {
			t.Errorf("copies %v: the first refused, the last placed", copies)
		}
		for _, c := range copies {
			if c.Parent().SpanID() != process[0].SpanContext().SpanID() {
				t.Errorf("copy %v is not the process span's child", c.SpanContext())
			}
		}
	})
	t.Run("rung missing", func(t *testing.T) {
		t.Parallel()
		rec, tp := tracing(t)
		f := start(t, &acemq.Server{Retry: retry.Fixed(2, time.Minute), TracerProvider: tp}, map[string]acemq.Handler{"q": answerSeq(ack.Retry(errBoom))})
		f.broker.DeleteQueue("q.retry.1m")
		f.publish("q", "{}", nil)
		f.eventually("attempt 1", func() bool { return started(rec, "process q") == 1 })
		f.advance(1, time.Minute)
		f.eventually("attempt 2", func() bool { return len(named(rec, "process q")) == 2 })
		first := named(rec, "process q")[0]
		if attr(first, "acemq.outcome").AsString() != "retry" || attr(first, "acemq.where").AsString() != "process" || attr(first, "acemq.to").AsString() != "q" {
			t.Errorf("attempt 1: %v", first.Attributes())
		}
		if ev := first.Events(); !slices.ContainsFunc(ev, func(e sdktrace.Event) bool { return e.Name == "acemq.rung.missing" }) {
			t.Errorf("events %v, want acemq.rung.missing", ev)
		}
	})
}

// TestGlobalProvidersByDefault: a server and a publisher given no
// providers use otel's global ones, and W3C trace context while the
// global propagator is otel's default, which propagates nothing. Not
// parallel: it sets otel's globals, and restores them.
func TestGlobalProvidersByDefault(t *testing.T) {
	rec, tp := tracing(t)
	mp, reader := metrictest.New(t)
	prevTP, prevMP, prevProp := otel.GetTracerProvider(), otel.GetMeterProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetMeterProvider(prevMP)
		otel.SetTextMapPropagator(prevProp)
	})
	if len(otel.GetTextMapPropagator().Fields()) != 0 {
		t.Fatal("the global propagator is not otel's default")
	}

	mux := acemq.NewMux()
	mux.Handle("orders", answerSeq(ack.Retry(errBoom)))
	ts := acemqtest.NewServer(t, mux, &acemq.Server{Retry: retry.Fixed(2, time.Second), Logger: zap.NewNop()})
	if _, err := (&acemq.Publisher{Transport: ts.Conn}).Publish(context.Background(), acemq.Outgoing{RoutingKey: "orders", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	ts.RunUntilIdle(t) // both attempts handled and settled: their spans ended, their counts recorded

	publish, process := named(rec, "publish orders"), named(rec, "process orders")
	if len(publish) != 2 || len(process) != 2 {
		t.Fatalf("%d publish and %d process spans, want 2 and 2", len(publish), len(process))
	}
	for _, s := range process {
		if s.SpanContext().TraceID() != publish[0].SpanContext().TraceID() {
			t.Errorf("%s is in another trace than the publish: no trace context crossed the broker", s.Name())
		}
	}
	for outcome, want := range map[string]int64{"retry": 1, "accept": 1} {
		if got := metrictest.Sum(t, reader, acemq.MetricHandled, map[string]string{"outcome": outcome}); got != want {
			t.Errorf("handled{%s} from the global meter provider = %d, want %d", outcome, got, want)
		}
	}
}

// TestTraceContinuesOnRabbitMQ: the headers carry the trace through a
// real broker, and through a rung.
func TestTraceContinuesOnRabbitMQ(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	rec, tp := tracing(t)
	r.serve(r.tr, q, &acemq.Server{Retry: retry.Fixed(2, 200*time.Millisecond).WithBrokerWaitThreshold(100 * time.Millisecond), TracerProvider: tp},
		answerSeq(ack.Retry(errBoom)))
	if _, err := (&acemq.Publisher{Transport: r.tr, Mandatory: true, TracerProvider: tp}).Publish(context.Background(),
		acemq.Outgoing{RoutingKey: q, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	r.eventually("two attempts", func() bool { return len(named(rec, "process "+q)) == 2 })
	process := named(rec, "process "+q)
	rung := named(rec, "publish "+retry.RungName(q, 200*time.Millisecond))
	if len(rung) != 1 || process[1].Parent().SpanID() != rung[0].SpanContext().SpanID() {
		t.Fatalf("attempt 2's parent %v, want the rung copy's span %v", process[1].Parent(), rung)
	}
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() != process[0].SpanContext().TraceID() {
			t.Errorf("span %q is in another trace", s.Name())
		}
	}
	if attr(process[0], "acemq.where").AsString() != "broker" || attr(process[1], "acemq.outcome").AsString() != "accept" {
		t.Errorf("attempts: %v / %v", process[0].Attributes(), process[1].Attributes())
	}
}

// BenchmarkServerTracing is BenchmarkServerMemory's accept-all server
// with tracing off (a noop.TracerProvider: nothing spent), with the
// global provider left as otel's default (a non-recording span per
// message), and with an SDK provider that samples every span and exports
// none.
func BenchmarkServerTracing(b *testing.B) {
	for _, bc := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"off", tracenoop.NewTracerProvider()},
		{"global", nil},
		{"sdk", sdktrace.NewTracerProvider()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			broker := memory.New(memory.WithRealClock())
			defer broker.Close()
			conn := broker.Connect()
			defer conn.Close()
			ctx := context.Background()
			if err := conn.Declare(ctx, acemq.Topology("bench", retry.Policy{}, nil)); err != nil {
				b.Fatal(err)
			}
			pub := transport.Publishing{RoutingKey: "bench", Headers: map[string]any{acemq.HeaderID: "x", acemq.HeaderAttempt: int64(1)}, Body: []byte(`{}`)}
			for range b.N {
				if _, err := conn.Publish(ctx, pub); err != nil {
					b.Fatal(err)
				}
			}
			var handled atomic.Int64
			done := make(chan struct{})
			mux := acemq.NewMux()
			mux.HandleFunc("bench", func(context.Context, *acemq.Message) ack.Ack {
				if handled.Add(1) == int64(b.N) {
					close(done)
				}
				return ack.Accept()
			})
			srv := &acemq.Server{Transport: conn, Handler: mux, Prefetch: 256, TracerProvider: bc.tp, MeterProvider: metricnoop.NewMeterProvider()}
			b.ReportAllocs()
			b.ResetTimer()
			runErr := make(chan error, 1)
			go func() { runErr <- srv.Run(ctx) }()
			<-done
			b.StopTimer()
			_ = srv.Shutdown(ctx)
			if err := <-runErr; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestReplaySpan: a replayed copy is published under a producer span, a
// child of the trace context the dead letter carries (its last
// attempt's), and carries that span's: its next attempt joins its trace.
func TestReplaySpan(t *testing.T) {
	t.Parallel()
	rec, tp := tracing(t)
	broker, conn := bare(t)
	ctx := context.Background()
	if err := conn.Declare(ctx, acemq.Topology("orders", retry.Policy{}, nil)); err != nil {
		t.Fatal(err)
	}
	_, last := tp.Tracer("test").Start(ctx, "publish orders.dlq")
	last.End()
	if _, err := conn.Publish(ctx, transport.Publishing{RoutingKey: "orders.dlq", Body: []byte("{}"), Headers: map[string]any{
		acemq.HeaderID: "order-1", acemq.HeaderAttempt: int64(5), acemq.HeaderError: "exhausted 5 attempts: boom",
		"traceparent": traceparent(last.SpanContext()),
	}}); err != nil {
		t.Fatal(err)
	}
	if res, err := acemq.Replay(ctx, conn, "orders.dlq", acemq.ReplayOptions{TracerProvider: tp}); err != nil || res.Moved != 1 {
		t.Fatalf("replay: %v, %v", res, err)
	}
	spans := named(rec, "publish orders")
	if len(spans) != 1 || spans[0].Parent().SpanID() != last.SpanContext().SpanID() ||
		attr(spans[0], "acemq.replay.from").AsString() != "orders.dlq" || attr(spans[0], "acemq.attempt").AsInt64() != 1 {
		t.Fatalf("replay spans %v", spans)
	}
	if got := broker.Peek("orders")[0].Headers["traceparent"]; got != traceparent(spans[0].SpanContext()) {
		t.Errorf("the replayed copy carries %v, want the replay span's context", got)
	}
}
