package telemetry

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestUnsetGlobalCostsNothing: with otel's global provider and none set
// behind it, starting a span allocates nothing and gives the caller the
// span context of its parent, as the global stand-in's span would: a
// publish inside a remote parent's trace carries that trace on.
func TestUnsetGlobalCostsNothing(t *testing.T) {
	tracer := Tracer(nil, Scope)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	parent := trace.ContextWithRemoteSpanContext(context.Background(), sc)
	for _, start := range []func() (context.Context, trace.Span){
		func() (context.Context, trace.Span) { return Start(parent, tracer, "process q") },
		func() (context.Context, trace.Span) {
			return StartPublish(parent, tracer, Publish{RoutingKey: "q", ID: "id-1", BodySize: 3})
		},
	} {
		ctx, span := start()
		if span.IsRecording() || !span.SpanContext().Equal(sc) || !trace.SpanContextFromContext(ctx).Equal(sc) {
			t.Errorf("span %v recording %v, ctx %v; want the parent's %v, not recording",
				span.SpanContext(), span.IsRecording(), trace.SpanContextFromContext(ctx), sc)
		}
		if n := testing.AllocsPerRun(100, func() { _, s := start(); s.End() }); n != 0 {
			t.Errorf("%v allocations per span with no provider set, want 0", n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = Tracer(nil, Scope); _ = Propagator(nil) }); n != 0 {
		t.Errorf("%v allocations per Tracer and Propagator, want 0", n)
	}
}

// TestSetGlobalRecords: once the program sets a provider, a tracer taken
// from the global one before that records again. It runs in a process of
// its own, since setting the global provider cannot be undone.
func TestSetGlobalRecords(t *testing.T) {
	if os.Getenv("ACEMQ_TELEMETRY_SET_GLOBAL") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSetGlobalRecords$", "-test.count=1")
		cmd.Env = append(os.Environ(), "ACEMQ_TELEMETRY_SET_GLOBAL=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	tracer := Tracer(nil, Scope) // the global stand-in's
	if _, span := StartPublish(context.Background(), tracer, Publish{RoutingKey: "q"}); span.IsRecording() {
		t.Fatal("a span records with no provider set")
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp)
	ctx, span := StartPublish(context.Background(), tracer, Publish{RoutingKey: "q"})
	_, child := Start(ctx, tracer, "process q")
	if !span.IsRecording() || !child.IsRecording() {
		t.Fatal("spans do not record after otel.SetTracerProvider")
	}
	child.End()
	span.End()
	if got := len(rec.Ended()); got != 2 {
		t.Errorf("%d spans ended, want 2", got)
	}
}

// TestTracerFollowsProvider: the tracer Tracer remembers is the one of the
// provider and scope asked for, whichever was asked before.
func TestTracerFollowsProvider(t *testing.T) {
	t.Parallel()
	recA, recB := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	tpA := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recA))
	tpB := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recB))
	for i, tp := range []*sdktrace.TracerProvider{tpA, tpB, tpA, tpA, tpB} {
		_, span := Start(context.Background(), Tracer(tp, []string{Scope, "other"}[i%2]), "process q")
		span.End()
	}
	if a, b := len(recA.Ended()), len(recB.Ended()); a != 3 || b != 2 {
		t.Errorf("spans ended: %d on A, %d on B; want 3 and 2", a, b)
	}
	for i, s := range recA.Ended() {
		if want := []string{Scope, Scope, "other"}[i]; s.InstrumentationScope().Name != want {
			t.Errorf("span %d of A in scope %q, want %q", i, s.InstrumentationScope().Name, want)
		}
	}
}
