package acemq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/middleware"
)

// logged is a middleware that prints the queue of each message it sees.
func logged(name string) acemq.Middleware {
	return func(next acemq.Handler) acemq.Handler {
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			fmt.Println(name, "saw", m.Queue())
			return next.ServeMessage(ctx, m)
		})
	}
}

// Middleware for one queue with With, for a block of queues with Group;
// the Mux's own (Use) wraps them all, outermost.
func ExampleMux_With() {
	mux := acemq.NewMux()
	mux.Use(logged("every queue"))
	mux.With(logged("billing only")).HandleFunc("billing", func(context.Context, *acemq.Message) ack.Ack {
		return ack.Accept()
	})
	mux.Group(func(m *acemq.Mux) {
		m.Use(logged("the notify group"))
		m.HandleFunc("emails", func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })
		m.HandleFunc("sms", func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })
	})
	fmt.Println(mux.Queues())
	for _, q := range []string{"billing", "sms"} {
		mux.ServeMessage(context.Background(), acemq.NewMessage(q, nil, nil))
	}
	// Output:
	// [billing emails sms]
	// every queue saw billing
	// billing only saw billing
	// every queue saw sms
	// the notify group saw sms
}

// Idempotency after decoding: middleware given to Decoded runs once the
// body is read, so a body that cannot be read is parked without a claim on
// the store, and a second delivery of a good one is a duplicate (accepted,
// not sent again). MaxAge, on the Mux, sees every message.
func ExampleDecoded_idempotent() {
	type Email struct {
		To string `json:"to"`
	}
	store := idempotency.NewMemory(24 * time.Hour)
	send := func(ctx context.Context, m *acemq.Message, e Email) ack.Ack {
		fmt.Println("sent to", e.To)
		return ack.Accept()
	}
	mux := acemq.NewMux()
	mux.With(middleware.MaxAge(6*time.Hour)).Handle("emails",
		acemq.Decoded(codec.JSON, send, middleware.Idempotent(store)))

	ctx := context.Background()
	email := acemq.NewMessage("emails", []byte(`{"to":"ada@example.com"}`), map[string]any{acemq.HeaderID: "welcome:ada"})
	fmt.Println(mux.ServeMessage(ctx, email).Outcome())
	fmt.Println(mux.ServeMessage(ctx, email).Outcome()) // delivered again
	garbled := acemq.NewMessage("emails", []byte(`<email/>`), map[string]any{acemq.HeaderID: "welcome:bob"})
	fmt.Println(mux.ServeMessage(ctx, garbled).Outcome())
	// Output:
	// sent to ada@example.com
	// accept
	// accept
	// park
}
