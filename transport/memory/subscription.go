package memory

import (
	"context"
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
	ch       chan transport.Delivery

	// guarded by the broker's lock
	held     holder
	canceled bool
	closed   bool
}

var _ transport.Subscription = (*subscription)(nil)

// Deliveries yields the queue's messages; it is closed by Cancel, Close,
// the connection's Close, or the queue's deletion.
func (s *subscription) Deliveries() <-chan transport.Delivery { return s.ch }

// Cancel stops deliveries and closes the Deliveries channel; what is
// buffered in it can still be received, and every delivery stays
// settleable until Close.
func (s *subscription) Cancel(ctx context.Context) error {
	b := s.c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	s.cancelLocked()
	return nil
}

// Close cancels the subscription and gives its unsettled deliveries back
// to the queue, marked redelivered; settling one afterwards is
// ErrStaleDelivery. It is idempotent.
func (s *subscription) Close() error {
	b := s.c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	s.closeLocked()
	return nil
}

func (s *subscription) cancelLocked() {
	if s.canceled {
		return
	}
	s.canceled = true
	q := s.q
	if i := slices.Index(q.consumers, s); i >= 0 {
		q.consumers = slices.Delete(q.consumers, i, i+1)
		if q.rr > i {
			q.rr--
		}
		if q.rr >= len(q.consumers) {
			q.rr = 0
		}
	}
	close(s.ch)
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
	s.c.b.giveBack(s.held.takeAll())
}

// Err says why Deliveries closed unasked; see transport.Subscription.
func (s *subscription) Err() error { return nil }
