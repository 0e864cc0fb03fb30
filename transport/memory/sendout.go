package memory

import (
	"slices"
	"sync"
)

// Deliveries are handed to a subscription under the broker's lock but sent
// after it: deliver only queues the message on the subscription (post),
// and whoever releases the lock (Broker.unlock) then builds each delivery
// (a map of its headers, a copy of its body) and puts it in the
// subscription's channel. The lock is the one every publish and every ack
// takes, and building and sending a delivery was most of the time it was
// held: a send that wakes a waiting consumer is a trip through the
// scheduler. Nothing else changes: the sends never block (the channel
// buffers the prefetch, and the broker never has more than that
// unsettled on a subscription), a subscription's deliveries keep their
// order (one sender at a time, taking them in the order they were
// posted), and every call that delivers has sent what it delivered by the
// time it returns, since it sends them itself as it releases the lock.

// outbox is what a subscription was delivered and has not been sent yet.
type outbox struct {
	// mu is taken for each post (under the broker's lock) and for each
	// send (without it), never the other way round: senders never take
	// the broker's lock.
	mu      sync.Mutex
	pending []*message
	closed  bool // the subscription's channel is closed
}

// post queues m for s. Call with b.mu held.
func (b *Broker) post(s *subscription, m *message) {
	s.out.mu.Lock()
	s.out.pending = append(s.out.pending, m)
	s.out.mu.Unlock()
	if !s.posted {
		s.posted = true
		b.posted = append(b.posted, s)
	}
}

// unlock settles the queued acks (acks.go), releases the broker's lock
// and sends what was posted under it. Every release of b.mu goes through
// it, so that nothing posted or queued waits for someone else's.
func (b *Broker) unlock() {
	for {
		b.settleAcks() // acks.go
		b.release()
		// An Ack queued while the lock was held, by a goroutine that
		// found it taken, is settled here unless another holder does.
		if b.acks.n.Load() == 0 || !b.mu.TryLock() {
			return
		}
	}
}

// release releases the lock and sends what was posted under it.
func (b *Broker) release() {
	if len(b.posted) == 0 {
		b.mu.Unlock()
		return
	}
	var few [4]*subscription
	subs := few[:0]
	if len(b.posted) > len(few) {
		subs = slices.Clone(b.posted)
	} else {
		subs = append(subs, b.posted...)
	}
	for _, s := range b.posted {
		s.posted = false
	}
	clear(b.posted)
	b.posted = b.posted[:0]
	b.mu.Unlock()
	for _, s := range subs {
		b.send(s)
	}
}

// send puts what was posted to s in its channel, in order.
func (b *Broker) send(s *subscription) {
	s.out.mu.Lock()
	defer s.out.mu.Unlock()
	for i, m := range s.out.pending {
		s.out.pending[i] = nil
		if !s.out.closed {
			s.ch <- b.delivery(m, m) // never blocks: the buffer holds prefetch
		}
	}
	s.out.pending = s.out.pending[:0]
}

// closeChannel sends what is posted to s and closes its channel: what was
// delivered before a cancel can still be received. Call with b.mu held.
func (b *Broker) closeChannel(s *subscription) {
	s.out.mu.Lock()
	defer s.out.mu.Unlock()
	for i, m := range s.out.pending {
		s.out.pending[i] = nil
		s.ch <- b.delivery(m, m)
	}
	s.out.pending = s.out.pending[:0]
	s.out.closed = true
	close(s.ch)
	close(s.ended)
}

// dropUnsent drops what was delivered to s and not received yet, posted
// or in its channel: the channel closed under it, and the broker takes
// those back. Call with b.mu held.
func (s *subscription) dropUnsent() {
	s.out.mu.Lock()
	defer s.out.mu.Unlock()
	clear(s.out.pending)
	s.out.pending = s.out.pending[:0]
	for len(s.ch) > 0 {
		select {
		case <-s.ch:
		default:
		}
	}
}
