package acemq

import (
	"context"
	"fmt"
	"slices"

	"github.com/acemq/acemq/ack"
)

// Mux routes messages to handlers by the queue they came from. It is itself
// a Handler, and a Server consumes every queue it names.
//
// Middleware for every queue goes on with [Mux.Use]; middleware for some
// queues only, in the shape chi's router has, with [Mux.With] (for one
// registration) or [Mux.Group] (for a block of them). Both make a Mux that
// registers into this one: its handlers are served, and its queues listed,
// by the Mux it was made from.
type Mux struct {
	routes  map[string]Handler // shared with every Mux made from this one
	parent  *Mux               // the Mux With or Group made this one from
	mws     []Middleware
	handled int // handlers registered through this Mux or one made from it
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{routes: make(map[string]Handler)} }

// Use appends middleware that wraps every handler registered after it,
// through this Mux or one made from it. Like chi, middleware comes before
// routes: Use after a Handle that it would have wrapped panics, since the
// handlers already registered would silently miss it. A nil middleware
// panics.
func (mx *Mux) Use(mws ...Middleware) {
	if mx.handled > 0 {
		panic("acemq: Mux.Use after Handle: middleware must be added before the handlers it wraps")
	}
	checkMiddleware("Mux.Use", mws)
	mx.mws = append(mx.mws, mws...)
}

// With returns a Mux whose handlers are wrapped in mws inside this Mux's
// own middleware: mux.With(mw).Handle(queue, h) gives one queue middleware
// the others do not have. The handlers it registers belong to this Mux
// (same routes, same Queues); a queue registered on both panics as a
// duplicate. A nil middleware panics.
func (mx *Mux) With(mws ...Middleware) *Mux {
	checkMiddleware("Mux.With", mws)
	return &Mux{routes: mx.routes, parent: mx, mws: slices.Clone(mws)}
}

// Group calls fn with a Mux made from this one, as chi's Group does: the
// middleware fn adds with Use wraps the handlers fn registers, and no
// others. The handlers belong to this Mux. A nil fn panics.
func (mx *Mux) Group(fn func(m *Mux)) {
	if fn == nil {
		panic("acemq: Mux.Group with a nil function")
	}
	fn(&Mux{routes: mx.routes, parent: mx})
}

// Handle registers h for queue, wrapped in the middleware of this Mux and
// of the Muxes it was made from, the outermost first. An empty queue name,
// a nil handler, a queue registered twice or a middleware that returns a
// nil handler panics, at registration rather than at the first message.
func (mx *Mux) Handle(queue string, h Handler) {
	switch {
	case queue == "":
		panic("acemq: Mux.Handle with an empty queue name")
	case h == nil:
		panic(fmt.Sprintf("acemq: Mux.Handle(%q) with a nil handler", queue))
	case mx.routes[queue] != nil:
		panic(fmt.Sprintf("acemq: Mux.Handle(%q) registered twice", queue))
	}
	wrapped := Chain(mx.middleware()...)(h)
	if wrapped == nil {
		panic(fmt.Sprintf("acemq: Mux.Handle(%q): a middleware returned a nil handler", queue))
	}
	mx.routes[queue] = wrapped
	for m := mx; m != nil; m = m.parent {
		m.handled++
	}
}

// HandleFunc registers a function for queue.
func (mx *Mux) HandleFunc(queue string, f func(ctx context.Context, m *Message) ack.Ack) {
	if f == nil {
		panic(fmt.Sprintf("acemq: Mux.HandleFunc(%q) with a nil function", queue))
	}
	mx.Handle(queue, HandlerFunc(f))
}

// Queues returns the registered queue names, sorted: every queue of the
// Mux NewMux made, whichever Mux made from it registered it.
func (mx *Mux) Queues() []string {
	qs := make([]string, 0, len(mx.routes))
	for q := range mx.routes {
		qs = append(qs, q)
	}
	slices.Sort(qs)
	return qs
}

// ServeMessage hands m to the handler of its queue. A message for a queue
// with no handler is dead-lettered with a reason naming the queue.
// A message from a partition of a partitioned queue goes to the handler of
// the partitioned queue.
func (mx *Mux) ServeMessage(ctx context.Context, m *Message) ack.Ack {
	q := m.Queue()
	if p := m.partition; p.Queue != "" {
		q = p.Queue
	}
	if h := mx.routes[q]; h != nil {
		return h.ServeMessage(ctx, m)
	}
	return ack.DeadLetter(fmt.Errorf("acemq: no handler for queue %q", m.Queue()))
}

// middleware is the chain a handler registered on mx gets: the root's
// middleware first (outermost), mx's own last.
func (mx *Mux) middleware() []Middleware {
	if mx.parent == nil {
		return mx.mws
	}
	return append(slices.Clip(mx.parent.middleware()), mx.mws...)
}

// checkMiddleware panics on a nil middleware, at registration: called at
// the first message it would panic there, for every message.
func checkMiddleware(where string, mws []Middleware) {
	for i, mw := range mws {
		if mw == nil {
			panic(fmt.Sprintf("acemq: %s with a nil middleware (argument %d)", where, i+1))
		}
	}
}

var _ Handler = (*Mux)(nil)
