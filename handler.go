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
//
// mws wrap fn after the body is decoded: they run only for a message that
// could be read, before fn and around its answer, the first listed
// outermost. That is the place for middleware.Idempotent on a queue whose
// handler is a Decoded one: a body that cannot be read is parked without a
// claim on the store, and a store that is down cannot make it a retry.
// Middleware that must see every message (MaxAge, logging) goes outside,
// on the Mux. A nil codec, fn or middleware panics.
func Decoded[T any](c codec.Codec, fn func(ctx context.Context, m *Message, v T) ack.Ack, mws ...Middleware) Handler {
	switch {
	case c == nil:
		panic("acemq: Decoded with a nil codec")
	case fn == nil:
		panic("acemq: Decoded with a nil function")
	}
	checkMiddleware("Decoded", mws)
	if len(mws) == 0 {
		return HandlerFunc(func(ctx context.Context, m *Message) ack.Ack {
			var v T
			if err := c.Unmarshal(m.Body(), &v); err != nil {
				return ack.Undecodable(err)
			}
			return fn(ctx, m, v)
		})
	}
	// The decoded value reaches fn through the context, under a key of this
	// Decoded's own, so that the middleware is wrapped once, at
	// registration, as a Mux wraps it, and not again for every message.
	key := &decodedKey{}
	inner := Chain(mws...)(HandlerFunc(func(ctx context.Context, m *Message) ack.Ack {
		v, ok := ctx.Value(key).(T)
		if !ok {
			// A middleware handed on a context not made from the one it
			// was given: decode again rather than call fn with nothing.
			if err := c.Unmarshal(m.Body(), &v); err != nil {
				return ack.Undecodable(err)
			}
		}
		return fn(ctx, m, v)
	}))
	if inner == nil {
		panic("acemq: Decoded: a middleware returned a nil handler")
	}
	return HandlerFunc(func(ctx context.Context, m *Message) ack.Ack {
		var v T
		if err := c.Unmarshal(m.Body(), &v); err != nil {
			return ack.Undecodable(err)
		}
		return inner.ServeMessage(context.WithValue(ctx, key, v), m)
	})
}

// decodedKey is the context key of one Decoded's value. It is not empty:
// pointers to distinct zero-size values may be equal.
type decodedKey struct{ _ byte }
