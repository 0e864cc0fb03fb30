package middleware_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
)

// BenchmarkChain is one message through a mux and the default chain:
// decode, max age, recover, then an accept-all handler.
func BenchmarkChain(b *testing.B) {
	mux := acemq.NewMux()
	mux.Use(middleware.Decode(codec.JSON), middleware.MaxAge(time.Hour), middleware.Recover(nil))
	mux.HandleFunc("orders", accept)
	body := []byte(`{"id":12345,"customer":"c-778","lines":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}],"total":"41.90"}`)
	m := acemq.NewMessage("orders", body, map[string]any{acemq.HeaderID: "id-1", acemq.HeaderAttempt: int64(1)})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if mux.ServeMessage(ctx, m).Err() != nil {
			b.Fatal("not accepted")
		}
	}
}

// BenchmarkBareMux is the baseline: the mux and the handler, no middleware.
func BenchmarkBareMux(b *testing.B) {
	mux := acemq.NewMux()
	mux.HandleFunc("orders", accept)
	m := acemq.NewMessage("orders", []byte(`{}`), nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		mux.ServeMessage(ctx, m)
	}
}

// BenchmarkTracing is the tracing middleware with no provider (the default:
// a no-op tracer) and with an SDK provider that samples everything, against
// the bare handler.
func BenchmarkTracing(b *testing.B) {
	m := acemq.NewMessage("orders", []byte(`{}`), map[string]any{
		acemq.HeaderID:  "id-1",
		"traceparent":   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"x-some-header": "v",
	})
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		h    acemq.Handler
	}{
		{"bare", acemq.HandlerFunc(accept)},
		{"no-provider", middleware.Tracing()(acemq.HandlerFunc(accept))},
		{"sdk", middleware.Tracing(middleware.WithTracerProvider(sdktrace.NewTracerProvider()))(acemq.HandlerFunc(accept))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.h.ServeMessage(ctx, m)
			}
		})
	}
}
