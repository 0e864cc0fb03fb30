package middleware_test

import (
	"context"
	"testing"
	"time"

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
