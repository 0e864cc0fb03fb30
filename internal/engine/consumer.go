package engine

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/acemq/acemq/transport"
)

// consumer is one queue being consumed: its workers take deliveries, run
// the handler, decide (decide.go) and settle (settle.go).
type consumer struct {
	e *Engine
	q *queueRun

	mu      sync.Mutex // guards sub, lease, retired and workers, which a resubscribe replaces
	sub     transport.Subscription
	lease   *lease   // sub's
	retired []*lease // the subscriptions consumed on before, closed once settled (lease.go)
	workers []*worker
	// consuming is false while the broker has ended the consumer and the
	// supervisor declares and consumes again: Server.CheckReady reads it.
	consuming atomic.Bool
	// awaiting is true while the queue, deleted under the server and
	// declared again, waits for its old subscription's handlers
	// (rejoin.go).
	awaiting atomic.Bool
	// takenBack is closed, and replaced, each time the broker takes back
	// what the consumer's channel held (consumer_timeout): a redelivery
	// waiting for its message's handler (awaitRunning) was on it too.
	// Guarded by mu; made when first asked for.
	takenBack chan struct{}
	// switching is closed once the breaker's cancel of sub took; not nil
	// from the switch until the supervisor consumes again (breaker.go).
	switching chan struct{}
	// coolingDown is set while the supervisor waits out the breaker's
	// cool-down on the engine's clock (acemqtest counts that wait).
	coolingDown atomic.Bool
	// markerWake asks keepMarker to look at the breaker again; made for a
	// queue with a breaker (breaker_marker.go).
	markerWake chan struct{}
	// holding counts the workers with a delivery in hand (Waiting), and
	// moves the changes Waiting reads (a worker taking or putting down a
	// delivery, its throttles admitting or releasing it), so that a reader
	// can tell its counts were taken while nothing moved (Moves).
	holding atomic.Int64
	moves   atomic.Uint64
	// breakerTurns is closed, and replaced, at each change of the breaker; made
	// when first asked for, guarded by mu (breaker.go).
	breakerTurns chan struct{}
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

// consumeOn makes sub the consumer's subscription, retiring the one
// before it (closed once what was taken from it has ended).
func (c *consumer) consumeOn(sub transport.Subscription) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lease != nil {
		c.lease.retire()
		c.retired = append(slices.DeleteFunc(c.retired, func(l *lease) bool { return l.isClosed() }), c.lease)
	}
	c.sub, c.lease = sub, newLease(sub, c.leaseLog)
}

// workersNow are the consumer's workers on its current subscription.
func (c *consumer) workersNow() []*worker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.workers
}
