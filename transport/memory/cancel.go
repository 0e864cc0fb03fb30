package memory

import (
	"fmt"
	"slices"

	"github.com/acemq/acemq/transport"
)

// CancelConsumers cancels every consumer of queue from the broker's side,
// as RabbitMQ's basic.cancel does when a queue's leader moves or an
// operator's policy ends the consumers, and leaves the queue and its
// messages in place: each subscription's Deliveries closes with Err
// wrapping [transport.ErrCancelled], and what it holds stays settleable,
// as on RabbitMQ, whose channel stays open. It returns how many consumers
// it cancelled, so that a test of the code that consumes again (a soak's
// fault schedule) knows it hit something.
func (b *Broker) CancelConsumers(queue string) int {
	b.lock()
	defer b.unlock()
	q := b.queues[queue]
	if q == nil {
		return 0
	}
	n := 0
	for _, s := range slices.Clone(q.consumers) {
		if s.canceled {
			continue
		}
		over := q.handsOver(s) // singleactive.go
		s.err = fmt.Errorf("%w of queue %q: the broker cancelled the consumer", transport.ErrCancelled, q.name)
		s.cancelLocked()
		if over {
			b.dispatch(q)
		}
		n++
	}
	return n
}
