package memory

import (
	"fmt"
	"slices"

	"github.com/acemq/acemq/transport"
)

// connLimit is the broker's max-connections (SetConnectionLimit) and the
// subscriptions it keeps waiting. Guarded by the broker's lock.
//
// The broker counts a connection for every Conn and one for every
// subscription that is connected: the amqp transport gives each consumer a
// connection of its own by default (WithConnectionPerConsumer), and a
// limit is met where those are dialled again.
type connLimit struct {
	max     int  // the limit, when set
	set     bool // false: no limit
	waiting []*subscription
	refused map[*subscription]*transport.RefusedError // the streak of each waiting subscription
	report  map[*subscription]func(error)             // ConsumeOptions.OnRefused
}

// SetConnectionLimit gives the broker a max-connections of n, as
// `rabbitmqctl set_vhost_limits -p VHOST '{"max-connections": n}'` gives
// a vhost one: a connection beyond it is refused for now, with RabbitMQ's
// 530 "connection limit (n) is reached". Zero refuses every new one; a
// negative n lifts the limit. Connections already open stay open.
//
// What the limit refuses is a subscription's connection: a Consume while
// the limit is reached fails with a [transport.RefusedError]
// ([transport.ErrRefused]), and a subscription whose connection
// [Broker.CloseConnections] closed waits, refused, until the limit leaves
// room. Each change of the limit is such a subscription's next try: it is
// connected again when there is room, in the order they were closed, and
// refused again (ConsumeOptions.OnRefused told) when there is not. A
// connection that closes (a subscription's or a Conn's Close) makes room
// too. Connect is never refused (it stands for a transport already
// dialled), though its Conn counts.
func (b *Broker) SetConnectionLimit(n int) {
	b.lock()
	b.limit.set, b.limit.max = n >= 0, n
	calls := b.admitWaiting(true)
	b.unlock()
	calls.run()
}

// CloseConnections closes every subscription's connection, as `rabbitmqctl
// close_all_connections` (or the management API) closes the connections
// of the amqp transport's consumers: what each held goes back to its queue
// marked redelivered, settling it afterwards is ErrStaleDelivery, and
// deliveries buffered in Deliveries are dropped. Each subscription then
// connects again at once, where the connection limit leaves room
// (SetConnectionLimit), and else waits, refused for now: Deliveries stays
// open and Err nil, ConsumeOptions.OnRefused is told, and it consumes
// again, at the back of its queue's consumers, once there is room. The
// Conns themselves stay open: the memory transport has no reconnect of
// its own to model.
func (b *Broker) CloseConnections() {
	b.lock()
	var held []*message
	for c := range b.conns {
		for _, s := range c.subs {
			if s.closed || slices.Contains(b.limit.waiting, s) {
				continue
			}
			held = append(held, b.dropConnection(s)...)
			b.limit.waiting = append(b.limit.waiting, s)
		}
	}
	calls := b.admitWaiting(false)
	b.giveBack(held)
	b.unlock()
	calls.run()
}

// dropConnection closes s's connection: its buffered deliveries are
// dropped, and what it held is taken from it, stale, to be given back; s
// leaves its queue's consumers.
func (b *Broker) dropConnection(s *subscription) []*message {
	b.stopConsumerTimer(s)
	clear(s.timeout.since)
	s.dropUnsent() // the closed channel's deliveries, sent or not: stale
	s.q.removeConsumer(s)
	return s.held.takeAll()
}

// connections counts the broker's open connections: its Conns and their
// connected subscriptions.
func (b *Broker) connections() int {
	n := 0
	for c := range b.conns {
		n++
		for _, s := range c.subs {
			if !s.closed && !slices.Contains(b.limit.waiting, s) {
				n++
			}
		}
	}
	return n
}

// roomFor says whether one more connection is within the limit.
func (b *Broker) roomFor() bool {
	return !b.limit.set || b.connections() < b.limit.max
}

// refusal is the broker's answer to a connection beyond its limit, in
// RabbitMQ 3.10.8's words.
func (b *Broker) refusal() string {
	return fmt.Sprintf("NOT_ALLOWED - access to vhost '/' refused for user '%s': connection limit (%d) is reached (530)", User, b.limit.max)
}

// refuseConsume is the error of a Consume the limit refuses, or nil.
func (b *Broker) refuseConsume() error {
	if b.roomFor() {
		return nil
	}
	now := b.clock.Now()
	return &transport.RefusedError{Cause: "connection_limit", Reason: b.refusal(), Tries: 1, Since: now}
}

// watchRefusals makes s tell f of its refusals (ConsumeOptions.OnRefused).
func (b *Broker) watchRefusals(s *subscription, f func(error)) {
	if f == nil {
		return
	}
	if b.limit.report == nil {
		b.limit.report = make(map[*subscription]func(error))
	}
	b.limit.report[s] = f
}

// forgetConnection drops what the limit keeps of s, closed, and lets the
// subscriptions waiting for room try again.
func (b *Broker) forgetConnection(s *subscription) calls {
	delete(b.limit.report, s)
	delete(b.limit.refused, s)
	if i := slices.Index(b.limit.waiting, s); i >= 0 {
		b.limit.waiting = slices.Delete(b.limit.waiting, i, i+1)
	}
	return b.admitWaiting(false)
}

// admitWaiting connects the waiting subscriptions again while there is
// room, in order, and refuses the others (a new try each, when retry or
// when it is their first). It returns the reports to make once the
// broker's lock is released.
func (b *Broker) admitWaiting(retry bool) calls {
	var out calls
	kept := b.limit.waiting[:0]
	for _, s := range b.limit.waiting {
		if s.closed {
			delete(b.limit.report, s)
			delete(b.limit.refused, s)
			continue
		}
		kept = append(kept, s)
	}
	b.limit.waiting = kept
	for len(b.limit.waiting) > 0 {
		s := b.limit.waiting[0]
		if !b.roomFor() {
			break
		}
		b.limit.waiting = b.limit.waiting[1:]
		_, wasRefused := b.limit.refused[s]
		delete(b.limit.refused, s)
		if !s.canceled {
			s.q.removeConsumer(s)
			s.q.consumers = append(s.q.consumers, s)
			b.dispatch(s.q)
		}
		if f := b.limit.report[s]; f != nil && wasRefused {
			out = append(out, func() { f(nil) })
		}
	}
	for _, s := range b.limit.waiting {
		r, ok := b.limit.refused[s]
		if ok && !retry {
			continue
		}
		if !ok {
			r = &transport.RefusedError{Cause: "connection_limit", Since: b.clock.Now()}
			if b.limit.refused == nil {
				b.limit.refused = make(map[*subscription]*transport.RefusedError)
			}
			b.limit.refused[s] = r
		}
		r.Tries++
		r.Reason = b.refusal()
		if f := b.limit.report[s]; f != nil {
			copied := *r
			out = append(out, func() { f(&copied) })
		}
	}
	return out
}

// calls are reports to subscriptions' users, made without the broker's
// lock: they are the users' code.
type calls []func()

func (cs calls) run() {
	for _, f := range cs {
		f()
	}
}
