package acemq

import (
	"sync"

	"github.com/acemq/acemq/transport"
)

// worker is one of a consumer's goroutines: what it is handling, and
// whether the stop has taken that over.
type worker struct {
	groups [2]*sync.WaitGroup // the engine's running, and the consumer's alive

	mu        sync.Mutex
	d         transport.Delivery
	m         *Message
	busy      bool // a handler is running on d
	abandoned bool // the stop gave d back and counted the worker as ended
}

func (w *worker) begin(d transport.Delivery, m *Message) {
	w.mu.Lock()
	w.d, w.m, w.busy = d, m, true
	w.mu.Unlock()
}

// end reports whether the worker still owns its delivery now that the
// handler has returned.
func (w *worker) end() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy = false
	w.d, w.m = transport.Delivery{}, nil
	return !w.abandoned
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
