package engine

import (
	"sync"
	"sync/atomic"

	"github.com/acemq/acemq/transport"
)

// consumer is one queue being consumed: its workers take deliveries, run
// the handler, decide (decide.go) and settle (settle.go).
type consumer struct {
	e *Engine
	q *queueRun

	mu      sync.Mutex // guards sub and workers, which a resubscribe replaces
	sub     transport.Subscription
	workers []*worker
	// consuming is false while the broker has ended the consumer and the
	// supervisor declares and consumes again: Server.CheckReady reads it.
	consuming atomic.Bool
	// takenBack is closed, and replaced, each time the broker takes back
	// what the consumer's channel held (consumer_timeout): a redelivery
	// waiting for its message's handler (awaitRunning) was on it too.
	// Guarded by mu; made when first asked for.
	takenBack chan struct{}
	// waitCapped says the first in-process wait cut short below the
	// broker's consumer timeout was logged.
	waitCapped atomic.Bool
}

// retakes is closed the next time the broker takes back what the
// consumer's channel holds.
func (c *consumer) retakes() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.takenBack == nil {
		c.takenBack = make(chan struct{})
	}
	return c.takenBack
}

// retaken says the broker took back what the consumer's channel held.
func (c *consumer) retaken() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.takenBack != nil {
		close(c.takenBack)
		c.takenBack = nil
	}
}

// workersNow are the consumer's workers on its current subscription.
func (c *consumer) workersNow() []*worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.workers
}
