package acemq

import (
	"context"
	"fmt"
	"slices"

	"github.com/acemq/acemq/ack"
)

// Mux routes messages to handlers by the queue they came from. It is itself
// a Handler, and a Server consumes every queue it names.
type Mux struct {
	routes map[string]Handler
	mws    []Middleware
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{routes: make(map[string]Handler)} }

// Use appends middleware that wraps every handler registered after it. Like
// chi, middleware comes before routes: Use after Handle panics, since the
// handlers already registered would silently miss it.
func (mx *Mux) Use(mws ...Middleware) {
	if len(mx.routes) > 0 {
		panic("acemq: Mux.Use after Handle: middleware must be added before the handlers it wraps")
	}
	mx.mws = append(mx.mws, mws...)
}

// Handle registers h for queue. An empty queue name, a nil handler or a
// queue registered twice panics, at registration rather than at the first
// message.
func (mx *Mux) Handle(queue string, h Handler) {
	switch {
	case queue == "":
		panic("acemq: Mux.Handle with an empty queue name")
	case h == nil:
		panic(fmt.Sprintf("acemq: Mux.Handle(%q) with a nil handler", queue))
	case mx.routes[queue] != nil:
		panic(fmt.Sprintf("acemq: Mux.Handle(%q) registered twice", queue))
	}
	mx.routes[queue] = Chain(mx.mws...)(h)
}

// HandleFunc registers a function for queue.
func (mx *Mux) HandleFunc(queue string, f func(ctx context.Context, m *Message) ack.Ack) {
	if f == nil {
		panic(fmt.Sprintf("acemq: Mux.HandleFunc(%q) with a nil function", queue))
	}
	mx.Handle(queue, HandlerFunc(f))
}

// Queues returns the registered queue names, sorted.
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
func (mx *Mux) ServeMessage(ctx context.Context, m *Message) ack.Ack {
	if h := mx.routes[m.Queue()]; h != nil {
		return h.ServeMessage(ctx, m)
	}
	return ack.DeadLetter(fmt.Errorf("acemq: no handler for queue %q", m.Queue()))
}

var _ Handler = (*Mux)(nil)
