package memory

import (
	"slices"
	"strings"

	"github.com/acemq/acemq/transport"
)

// Depth returns the number of ready messages in queue (not counting
// unacked ones), or 0 when it does not exist.
func (b *Broker) Depth(queue string) int {
	b.lock()
	defer b.unlock()
	q, err := b.lookup(queue)
	if err != nil {
		return 0
	}
	return q.ready.len()
}

// Unacked returns the number of messages of queue delivered and not yet
// settled, or 0 when it does not exist.
func (b *Broker) Unacked(queue string) int {
	b.lock()
	defer b.unlock()
	if q := b.queues[queue]; q != nil {
		return q.unacked
	}
	return 0
}

// Peek returns the ready messages of queue, oldest first, as a consumer
// would receive them, without taking them. Their Acknowledger refuses to
// settle (ErrStaleDelivery). A missing queue has none.
func (b *Broker) Peek(queue string) []transport.Delivery {
	b.lock()
	defer b.unlock()
	q, err := b.lookup(queue)
	if err != nil {
		return nil
	}
	out := make([]transport.Delivery, q.ready.len())
	for i := range out {
		out[i] = b.delivery(q.ready.at(i), peeked{})
	}
	return out
}

type peeked struct{}

func (peeked) Ack() error        { return transport.ErrStaleDelivery }
func (peeked) Reject(bool) error { return transport.ErrStaleDelivery }

// DeleteQueue deletes queue as queue.delete would, under running
// consumers: its messages are gone, its bindings removed, and its
// consumers cancelled as by RabbitMQ's basic.cancel (their Deliveries
// channels close and their Err is transport.ErrCancelled; settling what
// they hold succeeds and does nothing, as on RabbitMQ 3.10.8, whose
// channel stays open). It reports whether the queue existed.
func (b *Broker) DeleteQueue(queue string) bool {
	b.lock()
	defer b.unlock()
	q := b.queues[queue]
	if q == nil {
		return false
	}
	b.deleteQueue(q)
	return true
}

// DeleteExchange deletes an exchange as exchange.delete would: its
// bindings go with it, and so do the exchange bindings that lead to it. It
// reports whether the exchange existed; the default exchange cannot be
// deleted.
func (b *Broker) DeleteExchange(name string) bool {
	b.lock()
	defer b.unlock()
	if name == "" || b.exchanges[name] == nil {
		return false
	}
	delete(b.exchanges, name)
	for _, x := range b.exchanges {
		onward := x.onward[:0]
		for _, bd := range x.onward {
			if bd.x != name {
				onward = append(onward, bd)
			}
		}
		x.onward = onward
	}
	return true
}

// Unbind removes a binding and reports whether it existed; a test uses it
// to see what a missing binding does (a rung's expired messages are lost).
func (b *Broker) Unbind(bd transport.Binding) bool {
	b.lock()
	defer b.unlock()
	x, q := b.exchanges[bd.Exchange], b.queues[bd.Queue]
	return x != nil && q != nil && x.unbind(q, bd.Key, false)
}

// Queue returns the declaration of queue as it stands (arguments in the
// types a consumer of headers would see), and whether it exists.
func (b *Broker) Queue(name string) (transport.Queue, bool) {
	b.lock()
	defer b.unlock()
	q := b.queues[name]
	if q == nil {
		return transport.Queue{}, false
	}
	return transport.Queue{Name: q.name, Durable: q.durable, Exclusive: q.owner != nil, Args: copyTable(q.args, 0)}, true
}

// Exchange returns the declaration of an exchange and whether it exists.
func (b *Broker) Exchange(name string) (transport.Exchange, bool) {
	b.lock()
	defer b.unlock()
	x := b.exchanges[name]
	if x == nil {
		return transport.Exchange{}, false
	}
	return transport.Exchange{Name: x.name, Kind: x.kind, Durable: x.durable, Args: copyTable(x.args, 0)}, true
}

// Bindings returns the bindings of queue to named exchanges, sorted by
// exchange then key. (Every queue is also bound to the default exchange by
// its name; that one is not listed.)
func (b *Broker) Bindings(queue string) []transport.Binding {
	b.lock()
	defer b.unlock()
	var out []transport.Binding
	for name, x := range b.exchanges {
		for _, bd := range x.bindings {
			if bd.q.name == queue {
				out = append(out, transport.Binding{Queue: queue, Exchange: name, Key: bd.key})
			}
		}
	}
	slices.SortFunc(out, func(a, c transport.Binding) int {
		if n := strings.Compare(a.Exchange, c.Exchange); n != 0 {
			return n
		}
		return strings.Compare(a.Key, c.Key)
	})
	return out
}
