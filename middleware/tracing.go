package middleware

import (
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/acemq/acemq"
)

// TracingOption configures Tracing.
//
// Deprecated: Tracing does nothing; see Tracing.
type TracingOption interface{ apply() }

type tracingOption struct{}

func (tracingOption) apply() {}

// WithTracerProvider was where Tracing's spans went. The provider given is
// not used: the spans of a delivery are the server's, and go where
// acemq.Server.TracerProvider says. It is not made to work again, because
// a middleware's span would be a second one per delivery that ends before
// the settlement it should report (see Tracing). It and Tracing are kept
// for one release so that a chain that lists them still compiles.
//
// Deprecated: set acemq.Server.TracerProvider, or the global provider
// (otel.SetTracerProvider), which the server uses when given none.
func WithTracerProvider(trace.TracerProvider) TracingOption { return tracingOption{} }

// WithPropagator was how Tracing read trace context from headers.
//
// Deprecated: set acemq.Server.Propagator, or the global propagator
// (otel.SetTextMapPropagator); with neither, the server reads and writes
// W3C trace context.
func WithPropagator(propagation.TextMapPropagator) TracingOption { return tracingOption{} }

// Tracing returns the handler as it is.
//
// Deprecated: the server makes the process span of every delivery itself,
// from the trace context its headers carry, around the handler and the
// settlement, and ends it with what the server did (a retry, where; a dead
// letter, and why); a middleware sees only the handler's answer, never
// that the last retry was dead-lettered, and its span ended before the
// copy that carries the trace on to the next attempt was published. Set
// acemq.Server.TracerProvider (or the global provider) instead. Tracing is
// kept, a no-op, so that a chain that lists it compiles and still makes
// one span per delivery, not two. The handler's context holds the
// server's span.
func Tracing(...TracingOption) acemq.Middleware {
	return func(next acemq.Handler) acemq.Handler { return next }
}
