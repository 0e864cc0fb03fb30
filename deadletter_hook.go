package acemq

import (
	"context"
	"maps"
)

// BeforeDeadLetter asks the server to run f if it gives up on this
// message (its attempts spent, too old, a fatal error, rejected: what sends
// it to Q.dlq), before its dead letter is published. It is where work that
// must happen once a message is given up on, and never without it, goes:
// package slip starts a routing slip's compensation there. f is given the
// dead letter's reason (its x-acemq-error) and returns the
// headers to set on the dead letter (the library's own are written after,
// and win); nil sets none.
//
// Until f succeeds the dead letter is not published: an error from f holds
// the message unacknowledged, as a dead letter the broker refused is held,
// and f and the dead letter are tried again after 1 s, doubling to 30 s. A
// stop while it is held gives the message back, and its next delivery
// runs the handler again. Once f has succeeded it does not run again for
// this delivery, though the dead letter may be published again (a nack):
// its headers are kept. A message parked (ack.Park, or unreadable) is not
// given up on, and f does not run.
//
// Call it from the handler or a middleware while it runs; the last call
// wins. f runs after the handler returned, under a context that ends with
// the server's publish timeout or its shutdown deadline.
func (m *Message) BeforeDeadLetter(f func(ctx context.Context, reason string) (map[string]any, error)) {
	m.beforeDeadLetter = &deadLetterHook{run: f}
}

// deadLetterHook is what BeforeDeadLetter asked, and whether it ran.
type deadLetterHook struct {
	run  func(ctx context.Context, reason string) (map[string]any, error)
	done bool
	set  map[string]any
}

// beforeDeadLetter runs msg's hook, once, for the engine
// (engine.Config.BeforeDeadLetter).
func beforeDeadLetter(ctx context.Context, msg any, reason string) (map[string]any, error) {
	m, _ := msg.(*Message)
	if m == nil || m.beforeDeadLetter == nil {
		return nil, nil
	}
	h := m.beforeDeadLetter
	if !h.done {
		set, err := h.run(ctx, reason)
		if err != nil {
			return nil, err
		}
		h.done, h.set = true, maps.Clone(set)
	}
	return h.set, nil
}
