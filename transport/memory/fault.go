package memory

import (
	"fmt"
	"slices"
	"sync"

	"github.com/acemq/acemq/transport"
)

// Fault is what the broker does to one publish instead of taking it as
// usual: each is one way a real broker's answer goes wrong, so that code
// settling a republish can be tested for every one of them without a
// broker.
type Fault uint8

// The faults, from none to the worst.
const (
	// Deliver takes the publish as usual.
	Deliver Fault = iota
	// Nack refuses it, as a quorum queue without a leader or a full queue
	// under reject-publish does: nothing is enqueued, and Publish returns
	// an error wrapping [transport.ErrNacked].
	Nack
	// Block refuses it at once, as a connection blocked by a memory or
	// disk alarm does: nothing is sent, and Publish returns an error
	// wrapping [transport.ErrBlocked].
	Block
	// LoseConfirm routes and enqueues it, but the confirm never comes (the
	// channel closed with it in flight): Publish returns an error wrapping
	// [transport.ErrUnconfirmed], and the message IS in its queues.
	LoseConfirm
	// Drop loses it: the confirm never comes and nothing was enqueued.
	// Publish returns an error wrapping [transport.ErrUnconfirmed].
	Drop
)

var faultNames = [...]string{"deliver", "nack", "block", "lose-confirm", "drop"}

// String returns the fault's plain name, as errors and test logs show it.
func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("fault(%d)", uint8(f))
}

// SetPublishFault makes the broker ask fn about every publish, on every
// connection, once its headers and properties are checked and before it
// is routed; nil clears it. The broker's own dead-lettering is not asked
// about: it publishes nothing through a connection.
//
// fn is called with no lock of the broker held, so it may look at the
// broker or change it (Depth, Peek, DeleteQueue, even a publish of its
// own, which fn is asked about in turn). It is called from the publishing
// goroutines, several at once when they publish concurrently, and must
// not change the Publishing it is given.
func (b *Broker) SetPublishFault(fn func(transport.Publishing) Fault) {
	if fn == nil {
		b.fault.Store(nil)
		return
	}
	b.fault.Store(&fn)
}

// FaultNext returns a publish fault function (for
// [Broker.SetPublishFault]) that gives faults, one each and in order, to
// the next publishes to queue through the default exchange, and Deliver to
// every other publish and, once they are used up, to those too. It is
// safe for concurrent use: each fault goes to exactly one publish.
func FaultNext(queue string, faults ...Fault) func(transport.Publishing) Fault {
	var mu sync.Mutex
	next := slices.Clone(faults)
	return func(p transport.Publishing) Fault {
		if !toQueue(p, queue) {
			return Deliver
		}
		mu.Lock()
		defer mu.Unlock()
		if len(next) == 0 {
			return Deliver
		}
		f := next[0]
		next = next[1:]
		return f
	}
}

// FaultEvery returns a publish fault function (for
// [Broker.SetPublishFault]) that gives f to every publish to queue through
// the default exchange, and Deliver to the others: a broker that refuses
// one queue for good, until the test clears it with SetPublishFault(nil)
// (an alarm that clears, a leader elected at last).
func FaultEvery(queue string, f Fault) func(transport.Publishing) Fault {
	return func(p transport.Publishing) Fault {
		if toQueue(p, queue) {
			return f
		}
		return Deliver
	}
}

func toQueue(p transport.Publishing, queue string) bool {
	return p.Exchange == "" && p.RoutingKey == queue
}

// askFault returns the fault fn gives p, or Deliver when none is set. A
// closed connection is not asked about: its publish fails as usual.
func (c *Conn) askFault(p transport.Publishing) Fault {
	fn := c.b.fault.Load()
	if fn == nil {
		return Deliver
	}
	c.b.lock()
	closed := c.closed
	c.b.unlock()
	if closed {
		return Deliver
	}
	return (*fn)(p)
}

// faultErr is the error Publish returns for a fault other than Deliver.
func faultErr(p *transport.Publishing, f Fault) error {
	switch f {
	case Nack:
		return fmt.Errorf("memory: publish to %s: %w (publish fault %s)", destination(p), transport.ErrNacked, f)
	case Block:
		return fmt.Errorf("memory: publish to %s: %w (publish fault %s): the broker refuses publishes until the alarm clears",
			destination(p), transport.ErrBlocked, f)
	case LoseConfirm, Drop:
		return fmt.Errorf("memory: publish to %s: %w: the channel closed before the broker confirmed (publish fault %s)",
			destination(p), transport.ErrUnconfirmed, f)
	}
	return fmt.Errorf("memory: publish to %s: the publish fault function returned %s, which is no Fault", destination(p), f)
}

// destination names where p goes, for errors.
func destination(p *transport.Publishing) string {
	if p.Exchange == "" {
		return fmt.Sprintf("queue %q", p.RoutingKey)
	}
	return fmt.Sprintf("exchange %q (key %q)", p.Exchange, p.RoutingKey)
}
