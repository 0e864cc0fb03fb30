package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
	"go.uber.org/zap"
)

func ExampleDecode() {
	h := middleware.Decode(codec.JSON)(acemq.HandlerFunc(accept))
	a := h.ServeMessage(context.Background(), acemq.NewMessage("orders", []byte("<order/>"), nil))
	fmt.Println(a.Outcome())
	fmt.Println(a.Reason())
	// Output:
	// park
	// could not be decoded: acemq: this message is not JSON: 8 bytes that do not parse
}

func ExampleMaxAge() {
	h := middleware.MaxAge(time.Hour)(acemq.HandlerFunc(accept))
	dayOld := acemq.NewMessage("orders", nil, map[string]any{
		acemq.HeaderCreated: time.Now().Add(-24 * time.Hour).UnixMilli(),
	})
	fmt.Println(h.ServeMessage(context.Background(), dayOld).Outcome())
	// Output: dead-letter
}

func ExampleRecover() {
	h := middleware.Recover()(acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
		panic("boom")
	}))
	a := h.ServeMessage(context.Background(), acemq.NewMessage("orders", nil, nil))
	fmt.Println(a)
	// Output: retry: acemq: handler panicked: boom
}

func ExampleTimeout() {
	h := middleware.Timeout(time.Millisecond)(acemq.HandlerFunc(func(ctx context.Context, _ *acemq.Message) ack.Ack {
		<-ctx.Done() // a slow dependency that honours its context
		return ack.Retry(fmt.Errorf("warehouse: %w", ctx.Err()))
	}))
	fmt.Println(h.ServeMessage(context.Background(), acemq.NewMessage("orders", nil, nil)))
	// Output: retry: warehouse: context deadline exceeded
}

func ExampleLogging() {
	// zap.NewExample writes JSON lines to stdout, without timestamps.
	h := middleware.Logging(middleware.WithLogger(zap.NewExample()))(acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
		return ack.DeadLetter(errors.New("no such customer"))
	}))
	h.ServeMessage(context.Background(), acemq.NewMessage("orders", nil, map[string]any{acemq.HeaderID: "order-7"}))
	// Output is one warn line with queue, id, attempt, outcome, took, error and reason;
	// "took" varies, so this example is not checked.
}
