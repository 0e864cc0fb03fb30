package acemq

import (
	"context"
	"sync"
	"time"

	"github.com/acemq/acemq/transport"
)

// worker is one of a consumer's goroutines: what it is handling, and
// whether the stop has taken that over.
type worker struct {
	groups [2]*sync.WaitGroup // the engine's running, and the consumer's alive
	parent context.Context    // the engine's handler context

	mu        sync.Mutex
	ctx       context.Context // the handler's, made anew only once cancelled
	cancel    context.CancelFunc
	d         transport.Delivery
	m         *Message
	began     time.Time
	busy      bool // a handler is running on d
	overdue   bool // it ran past the handler timeout, and ctx was cancelled
	abandoned bool // the stop gave d back and counted the worker as ended
}

func newWorker(parent context.Context, groups [2]*sync.WaitGroup) *worker {
	w := &worker{groups: groups, parent: parent}
	w.ctx, w.cancel = context.WithCancel(parent)
	return w
}

// begin records the delivery a handler starts on, and returns the context
// the handler runs under.
func (w *worker) begin(d transport.Delivery, m *Message, now time.Time) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d, w.m, w.began, w.busy = d, m, now, true
	return w.ctx
}

// end reports whether the worker still owns its delivery now that the
// handler has returned.
func (w *worker) end() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy = false
	w.d, w.m = transport.Delivery{}, nil
	if w.overdue { // the next handler gets a context of its own
		w.overdue = false
		w.ctx, w.cancel = context.WithCancel(w.parent)
	}
	return !w.abandoned
}

// expire marks a handler running for longer than timeout at now as
// overdue, and returns its message and what ends its context; a nil
// message when there is none.
func (w *worker) expire(now time.Time, timeout time.Duration) (*Message, context.CancelFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.busy || w.overdue || w.abandoned || now.Sub(w.began) < timeout {
		return nil, nil
	}
	w.overdue = true
	return w.m, w.cancel
}

// takeOver takes the delivery of a running handler away from the worker,
// and marks the worker ended on its behalf.
func (w *worker) takeOver() (transport.Delivery, *Message, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.busy || w.abandoned {
		return transport.Delivery{}, nil, false
	}
	w.abandoned = true
	w.groups[0].Done()
	w.groups[1].Done()
	return w.d, w.m, true
}

// done marks the worker's goroutine ended, unless the stop did so already
// when it took the worker's delivery over.
func (w *worker) done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.abandoned {
		w.groups[0].Done()
		w.groups[1].Done()
	}
}
