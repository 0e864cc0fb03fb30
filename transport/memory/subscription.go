package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/acemq/acemq/transport"
)

// subscription is one consumer. Its Deliveries channel buffers up to
// prefetch deliveries, and the broker never has more than prefetch
// unsettled on it, so pushing a delivery never blocks.
type subscription struct {
	c        *Conn
	q        *queue
	tag      string
	prefetch int
	single   bool // ConsumeOptions.SingleActive: no probation, one consumer (singleactive.go)
	ch       chan transport.Delivery
	ended    chan struct{} // closed with ch (sendout.go)

	// guarded by the broker's lock
	held      holder
	probation bool // taking one delivery at a time until one is not redelivered
	canceled  bool
	closed    bool
	err       error // why it ended unasked; see Err
	timeout   consumerTimer
	posted    bool // in the broker's posted list (sendout.go)

	out outbox // delivered, not sent yet (sendout.go)
}

var _ transport.Subscription = (*subscription)(nil)

// Ended is closed once Deliveries is (transport.Ended).
func (s *subscription) Ended() <-chan struct{} { return s.ended }

var _ transport.Ended = (*subscription)(nil)

// Deliveries yields the queue's messages; it is closed by Cancel, Close,
// the connection's Close, or the queue's deletion (then Err is
// ErrCancelled).
func (s *subscription) Deliveries() <-chan transport.Delivery { return s.ch }

// Cancel stops deliveries and closes the Deliveries channel; what is
// buffered in it can still be received, and every delivery stays
// settleable until Close.
func (s *subscription) Cancel(ctx context.Context) error {
	b := s.c.b
	b.lock()
	defer b.unlock()
	over := s.q.handsOver(s) // singleactive.go
	s.cancelLocked()
	if over {
		b.dispatch(s.q)
	}
	return nil
}

// Close cancels the subscription and gives its unsettled deliveries back
// to the queue, marked redelivered; settling one afterwards is
// ErrStaleDelivery. It is idempotent.
func (s *subscription) Close() error {
	b := s.c.b
	b.lock()
	s.closeLocked()
	calls := b.forgetConnection(s) // connlimit.go: its connection made room
	b.unlock()
	calls.run()
	return nil
}

func (s *subscription) cancelLocked() {
	if s.canceled {
		return
	}
	s.canceled = true
	s.q.removeConsumer(s)
	s.c.b.closeChannel(s) // sendout.go
}

func (s *subscription) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	s.cancelLocked()
	for range s.ch { // drop buffered deliveries: they are given back below
	}
	if i := slices.Index(s.c.subs, s); i >= 0 {
		s.c.subs = slices.Delete(s.c.subs, i, i+1)
	}
	s.c.b.stopConsumerTimer(s)
	s.c.b.giveBack(s.held.takeAll())
}

// Err says why Deliveries closed unasked: ErrCancelled once the queue was
// deleted under the consumer, as RabbitMQ's basic.cancel says. It is nil
// while the subscription runs (a consumer timeout does not end it, see
// WithConsumerTimeout) and when Cancel or Close came first; once set it
// stays set.
func (s *subscription) Err() error {
	b := s.c.b
	b.lock()
	defer b.unlock()
	return s.err
}

// cancelledByBroker ends the subscription as RabbitMQ's basic.cancel does
// when the queue is deleted: Deliveries closes with Err set, and what it
// holds stays settleable (settling does nothing: the queue is gone).
func (s *subscription) cancelledByBroker() {
	if s.canceled {
		return
	}
	s.err = fmt.Errorf("%w of queue %q: the queue was deleted", transport.ErrCancelled, s.q.name)
	s.cancelLocked()
}
