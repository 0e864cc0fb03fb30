package memory

import (
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/transport"
)

// message is one message in one queue. While delivered and unsettled it
// is also the delivery's Acknowledger; a requeue puts a fresh copy back, so
// that a settled delivery stays settled (stale) forever.
type message struct {
	stored
	held    *holder // the channel it is unacked on
	settled bool    // released from held (guarded by the broker's lock)
	// claimed is set, atomically, by the first Ack or Reject of the
	// delivery and by its being taken back: whoever sets it settles it
	// (acks.go).
	claimed uint32
}

// stored is what a message is, as a requeued copy inherits it.
type stored struct {
	q          *queue
	exchange   string
	routingKey string
	keys       []string // every routing key (CC and BCC included), when more than routingKey
	headers    fields   // normalized; never changed once stored
	props      transport.Properties
	body       []byte // never changed once stored
	// spare is a copy of body, made with it in one allocation, for the
	// first delivery to hand out as its own; nil once taken (and on every
	// copy of the message: requeued, fanned out), when each delivery
	// copies body.
	spare []byte

	seq         uint64
	expires     time.Time // zero: never
	redelivered bool
	count       int // quorum queues: deliveries given back so far
}

var _ transport.Acknowledger = (*message)(nil)

// again returns the copy that goes back to the queue after m was given
// back.
func (m *message) again() *message {
	n := &message{stored: m.stored}
	n.redelivered = true
	n.spare = nil
	return n
}

// routes returns the routing keys the message was published with.
func (m *message) routes() []string {
	if m.keys != nil {
		return m.keys
	}
	return []string{m.routingKey}
}

// Reject rejects the delivery: back to the queue, or to the queue's
// dead-letter exchange (dropped when it has none).
func (m *message) Reject(requeue bool) error {
	if !m.claim() {
		return transport.ErrStaleDelivery
	}
	b := m.q.b
	b.lock()
	defer b.unlock()
	b.settle(m, true, requeue)
	return nil
}

// settle releases a claimed delivery and acts on it. Call with b.mu held.
func (b *Broker) settle(m *message, reject, requeue bool) {
	if m.settled { // taken back meanwhile: its channel closed
		return
	}
	q := m.q
	m.held.release(m)
	q.unacked--
	if q.deleted {
		return
	}
	switch {
	case !reject:
	case requeue:
		b.requeue(q, []*message{m})
	default:
		b.deadLetter(q, m, reasonRejected)
	}
	b.dispatch(q)
}

// delivery is what a consumer receives: its own copy of headers and body.
func (b *Broker) delivery(m *message, ack transport.Acknowledger) transport.Delivery {
	extra := 0
	if m.count > 0 {
		extra = 1
	}
	h := m.headers.toMap(extra)
	if m.count > 0 {
		h["x-delivery-count"] = int64(m.count)
	}
	body := m.spare
	m.spare = nil // no other delivery may see it
	if body == nil && m.body != nil {
		body = append(make([]byte, 0, len(m.body)), m.body...)
	}
	return transport.Delivery{
		Queue:        m.q.name,
		Exchange:     m.exchange,
		RoutingKey:   m.routingKey,
		Redelivered:  m.redelivered,
		Headers:      h,
		Properties:   m.props,
		Body:         body,
		Acknowledger: ack,
	}
}

// deliver hands m to s: unacked on s's channel until settled.
func (b *Broker) deliver(s *subscription, m *message) {
	s.held.add(m)
	m.q.unacked++
	b.post(s, m) // sent as the lock is released (sendout.go)
	if !m.redelivered {
		s.probation = false // probation.go
	}
}

// holder tracks the unsettled deliveries of one channel (a subscription,
// or a connection's basic.get), in delivery order.
type holder struct {
	list []*message // list[head:]; settled ones linger until trimmed
	head int
	live int
}

func (h *holder) add(m *message) {
	m.held = h
	h.list = append(h.list, m)
	h.live++
}

func (h *holder) release(m *message) {
	m.settled = true
	h.live--
	for h.head < len(h.list) && h.list[h.head].settled {
		h.list[h.head] = nil
		h.head++
	}
	switch {
	case h.head == len(h.list):
		h.list, h.head = h.list[:0], 0
	case len(h.list)-h.head > 64 && len(h.list)-h.head > 4*h.live:
		kept := make([]*message, 0, 2*h.live)
		for _, x := range h.list[h.head:] {
			if !x.settled {
				kept = append(kept, x)
			}
		}
		h.list, h.head = kept, 0
	case h.head > 32 && h.head > len(h.list)/2:
		n := copy(h.list, h.list[h.head:])
		clear(h.list[n:])
		h.list, h.head = h.list[:n], 0
	}
}

// takeAll settles every unsettled delivery and returns them, oldest first.
func (h *holder) takeAll() []*message {
	var out []*message
	for _, m := range h.list[h.head:] {
		if !m.settled {
			m.settled = true
			atomic.StoreUint32(&m.claimed, 1) // a late Ack or Reject is stale
			out = append(out, m)
		}
	}
	h.list, h.head, h.live = nil, 0, 0
	return out
}
