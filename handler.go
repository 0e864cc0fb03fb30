package acemq

import (
	"context"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
)

// Handler handles one message and says what to do with it. The context ends
// when the server's shutdown deadline cuts the handler off.
type Handler interface {
	ServeMessage(ctx context.Context, m *Message) ack.Ack
}

// HandlerFunc adapts a plain function to a Handler.
type HandlerFunc func(ctx context.Context, m *Message) ack.Ack

// ServeMessage calls f(ctx, m).
func (f HandlerFunc) ServeMessage(ctx context.Context, m *Message) ack.Ack { return f(ctx, m) }

// Middleware wraps a Handler in another.
type Middleware func(Handler) Handler

// Chain composes middleware; the first listed is the outermost, so it sees
// the message first and the Ack last.
func Chain(mws ...Middleware) Middleware {
	return func(h Handler) Handler {
		for i := len(mws) - 1; i >= 0; i-- {
			h = mws[i](h)
		}
		return h
	}
}

// Decoded adapts a function that takes the decoded body. A body the codec
// refuses is parked, reason "could not be decoded: ...", and fn is not called.
func Decoded[T any](c codec.Codec, fn func(ctx context.Context, m *Message, v T) ack.Ack) Handler {
	return HandlerFunc(func(ctx context.Context, m *Message) ack.Ack {
		var v T
		if err := c.Unmarshal(m.Body(), &v); err != nil {
			return ack.Park(err)
		}
		return fn(ctx, m, v)
	})
}
