package memory

import (
	"sync"
	"sync/atomic"

	"github.com/acemq/acemq/transport"
)

// Acks do not wait for the broker's lock. An Ack claims its delivery
// (message.claimed: the first Ack or Reject wins, and a delivery taken
// back is claimed by that, so a late one is ErrStaleDelivery as before),
// queues it on the broker and takes the lock only if it is free; whoever
// holds the lock settles the queued acks, as it takes the lock (lock) and
// before it releases it (unlock), so that every call sees the acks that
// returned before it began, as if each had taken the lock itself. The
// lock is the one every publish and ack took, and the four workers of a
// server acking one by one spent more time parked on it than settling.

// ackQueue is the acks waiting for the holder of the broker's lock.
type ackQueue struct {
	mu    sync.Mutex
	list  []*message
	n     atomic.Int32 // len(list), read without mu
	spare []*message   // the list before, reused (guarded by the broker's lock)
}

// Ack acknowledges the delivery.
func (m *message) Ack() error {
	if !m.claim() {
		return transport.ErrStaleDelivery
	}
	b := m.q.b
	b.acks.mu.Lock()
	b.acks.list = append(b.acks.list, m)
	b.acks.n.Add(1)
	b.acks.mu.Unlock()
	if b.mu.TryLock() {
		b.unlock() // settles it
	}
	return nil
}

// claim reports whether this is the delivery's first settlement.
func (m *message) claim() bool {
	return m.held != nil && atomic.CompareAndSwapUint32(&m.claimed, 0, 1)
}

// lock takes the broker's lock and settles the acks queued before.
func (b *Broker) lock() {
	b.mu.Lock()
	b.settleAcks()
}

// settleAcks settles the queued acks. Call with b.mu held.
func (b *Broker) settleAcks() {
	for b.acks.n.Load() > 0 {
		b.acks.mu.Lock()
		batch := b.acks.list
		b.acks.list = b.acks.spare[:0]
		b.acks.n.Store(0)
		b.acks.mu.Unlock()
		for _, m := range batch {
			b.settle(m, false, false)
		}
		clear(batch)
		b.acks.spare = batch[:0]
	}
}
