package telemetry

import (
	"context"
	"reflect"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// globalPkg is where otel keeps the global provider that stands in until
// the program sets one (otel.SetTracerProvider), and its tracers.
const globalPkg = "go.opentelemetry.io/otel/internal/global"

// noSpanNeeded reports whether a span tracer would start as a child of
// ctx could only be a non-recording copy of ctx's own span context: tracer
// is one of otel's global stand-ins, no provider has been set behind it
// (setting one replaces the global provider, so the check is current), and
// ctx's span records nothing. Such a span is what Start would return and
// costs six allocations; returning ctx and its span instead gives the
// caller the same span context (the same trace context injected, the same
// IsRecording) for none. Any other tracer, or otel's internals changing,
// takes the ordinary path.
func noSpanNeeded(ctx context.Context, tracer trace.Tracer) (trace.Span, bool) {
	if !isGlobal(reflect.TypeOf(tracer), "tracer") || !isGlobal(reflect.TypeOf(otel.GetTracerProvider()), "tracerProvider") {
		return nil, false
	}
	s := trace.SpanFromContext(ctx)
	if s.IsRecording() {
		return nil, false
	}
	return s, true
}

func isGlobal(t reflect.Type, name string) bool {
	if t == nil {
		return false
	}
	k := &globalTypes[0]
	if name == "tracerProvider" {
		k = &globalTypes[1]
	}
	if known := k.Load(); known != nil {
		return t == *known
	}
	if t.Kind() != reflect.Pointer || t.Elem().Name() != name || t.Elem().PkgPath() != globalPkg {
		return false
	}
	seen := t // a copy: storing &t would move every caller's t to the heap
	k.Store(&seen)
	return true
}

// globalTypes are the types of otel's global tracer and provider, once
// seen: comparing types is cheaper than reading their names each time.
var globalTypes [2]atomic.Pointer[reflect.Type]
