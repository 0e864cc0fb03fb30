package engine

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
	lease  *lease             // the subscription it takes deliveries from
	parent context.Context    // the engine's handler context

	mu        sync.Mutex
	ctx       context.Context // the handler's, made anew only once cancelled
	cancel    context.CancelFunc
	d         transport.Delivery
	m         message
	began     time.Time
	limit     time.Duration // the handler timeout in force when it began; <= 0: none
	busy      bool          // a handler is running on d
	overdue   bool          // it ran past its timeout, and ctx was cancelled
	takenBack bool          // the broker took d back (consumer_timeout): the answer cannot settle it
	abandoned bool          // the stop gave d back and counted the worker as ended
	// changed is closed when the handler on d ends or turns overdue, for a
	// redelivery of the same message waiting on it (awaitRunning); made
	// only when one waits.
	changed chan struct{}
}

func newWorker(parent context.Context, groups [2]*sync.WaitGroup) *worker {
	w := &worker{groups: groups, parent: parent}
	w.ctx, w.cancel = context.WithCancel(parent)
	return w
}

// begin records the delivery a handler starts on, with the handler
// timeout it runs under, and returns the context the handler runs under.
func (w *worker) begin(d transport.Delivery, m message, now time.Time, limit time.Duration) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d, w.m, w.began, w.limit, w.busy = d, m, now, limit, true
	return w.ctx
}

// end reports whether the worker still owns its delivery now that the
// handler has returned, and whether the broker took that delivery back
// meanwhile (its answer then settles nothing).
func (w *worker) end() (owned, takenBack bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	takenBack = w.takenBack
	w.busy, w.takenBack = false, false
	w.d, w.m = transport.Delivery{}, message{}
	w.signal()
	if w.overdue { // the next handler gets a context of its own
		w.overdue = false
		w.ctx, w.cancel = context.WithCancel(w.parent)
	}
	return !w.abandoned, takenBack
}

// signal wakes a redelivery waiting on this handler. Call with mu held.
func (w *worker) signal() {
	if w.changed != nil {
		close(w.changed)
		w.changed = nil
	}
}

// expire marks a handler running for longer than its timeout at now as
// overdue, and returns its message, the timeout and what ends its
// context; a nil message when there is none.
func (w *worker) expire(now time.Time) (message, time.Duration, context.CancelFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.busy || w.overdue || w.abandoned || w.limit <= 0 || now.Sub(w.began) < w.limit {
		return message{}, 0, nil
	}
	w.overdue = true
	w.signal()
	return w.m, w.limit, w.cancel
}

// takeBack marks the handler overdue when it has run for at least
// timeout (a timeout of 0 marks none) and, with stale, records that the
// broker took the worker's delivery back (it closed the channel for its
// consumer timeout). It returns the message, whether it turned overdue
// now, and what ends its context; a nil message when no handler runs.
func (w *worker) takeBack(now time.Time, timeout time.Duration, stale bool) (message, bool, context.CancelFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.busy || w.abandoned {
		return message{}, false, nil
	}
	w.takenBack = w.takenBack || stale
	if w.overdue || timeout <= 0 || now.Sub(w.began) < timeout {
		return w.m, false, nil
	}
	w.overdue = true
	w.signal()
	return w.m, true, w.cancel
}

// runningOn is what a redelivery of message id learns of this worker: ok
// when a handler runs here on that id, since when, whether it is
// overdue, and a channel closed when either changes.
func (w *worker) runningOn(id string) (r running, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.busy || w.abandoned || w.m.ID() != id {
		return running{}, false
	}
	if w.changed == nil {
		w.changed = make(chan struct{})
	}
	return running{w: w, began: w.began, overdue: w.overdue, limit: w.limit, changed: w.changed}, true
}

// running is a handler seen running on a message a redelivery carries.
type running struct {
	w       *worker
	began   time.Time
	overdue bool
	limit   time.Duration
	changed <-chan struct{}
}

// takeOver takes the delivery of a running handler away from the worker,
// and marks the worker ended on its behalf.
func (w *worker) takeOver() (transport.Delivery, message, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.busy || w.abandoned {
		return transport.Delivery{}, message{}, false
	}
	w.abandoned = true
	w.signal()
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
