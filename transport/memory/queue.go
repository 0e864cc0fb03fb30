package memory

import (
	"slices"
	"time"
)

// queue holds ready messages oldest first and hands them to its consumers
// round-robin, each up to its prefetch. Everything is guarded by the
// broker's lock.
type queue struct {
	b       *Broker
	self    []*queue // []*queue{q}: the default exchange's route, without allocating
	name    string
	durable bool
	owner   *Conn          // an exclusive queue's connection (exclusive.go), nil for the others
	args    map[string]any // as declared, normalized
	queueArgs

	ready      ring
	readyBytes int64 // the bodies of the ready messages, for x-max-length-bytes
	returned   int   // quorum: returned messages at the front, served first (a delivery limit, or a lost channel's)
	expiring   int   // ready messages with a deadline
	rejecting  bool  // quorum under reject-publish: over its limit, refusing publishes
	unacked    int
	consumers  []*subscription
	rr         int // the consumer whose turn it is
	deleted    bool
	held       []*dead // at-least-once dead letters not yet placed

	timer    *timer // the next expiry check
	timerAt  time.Time
	timerGen uint64
	busy     bool // dispatch is running: a nested call asks it to go again
	again    bool
}

func (q *queue) pushBack(m *message) {
	q.ready.pushBack(m)
	q.tally(m, 1)
}

func (q *queue) pushFront(m *message) {
	q.ready.pushFront(m)
	q.tally(m, 1)
}

func (q *queue) popFront() *message {
	m := q.ready.popFront()
	if m == nil {
		return nil
	}
	q.tally(m, -1)
	if q.returned > 0 {
		q.returned--
	}
	return m
}

// tally adds a ready message to the queue's tallies (sign 1) or takes it
// out of them (sign -1).
func (q *queue) tally(m *message, sign int) {
	if !m.expires.IsZero() {
		q.expiring += sign
	}
	q.readyBytes += int64(sign * len(m.body))
}

// removeConsumer takes s out of the round-robin.
func (q *queue) removeConsumer(s *subscription) {
	if i := slices.Index(q.consumers, s); i >= 0 {
		q.consumers = slices.Delete(q.consumers, i, i+1)
		if q.rr > i {
			q.rr--
		}
		if q.rr >= len(q.consumers) {
			q.rr = 0
		}
	}
}

// nextConsumer returns the next consumer in turn that has room under its
// prefetch, or nil.
func (q *queue) nextConsumer() *subscription {
	if q.sac {
		return q.active() // singleactive.go
	}
	n := len(q.consumers)
	for i := range n {
		s := q.consumers[(q.rr+i)%n]
		if s.room() {
			q.rr = (q.rr + i + 1) % n
			return s
		}
	}
	return nil
}

// accept takes a freshly routed message: straight to a consumer when the
// queue is empty and one has room (so even a zero TTL lets it through, as
// on RabbitMQ), else to the back of the queue.
func (b *Broker) accept(q *queue, m *message, ttl time.Duration, hasTTL bool) {
	m.q = q
	m.seq = b.nextSeq()
	if q.hasTTL && (!hasTTL || q.ttl < ttl) {
		ttl, hasTTL = q.ttl, true
	}
	if hasTTL {
		m.expires = b.clock.Now().Add(ttl) // kept if it is given back
	}
	if q.ready.len() == 0 && !q.busy {
		if s := q.nextConsumer(); s != nil {
			b.deliverTo(s, m)
			return
		}
	}
	q.pushBack(m)
	b.dispatch(q)
}

// dispatch drops what is over a drop-head queue's limit, expires due
// messages at the head and delivers the rest to consumers with room, then
// schedules the next expiry.
func (b *Broker) dispatch(q *queue) {
	if q.deleted {
		return
	}
	if q.busy {
		q.again = true
		return
	}
	q.busy = true
	for {
		q.again = false
		b.dropOverflow(q)
		b.pump(q)
		if !q.again {
			break
		}
	}
	q.busy = false
	q.limitReached()
	b.scheduleExpiry(q)
}

func (b *Broker) pump(q *queue) {
	var now time.Time
	for q.ready.len() > 0 && !q.deleted {
		if m := q.ready.front(); !m.expires.IsZero() {
			if now.IsZero() {
				now = b.clock.Now()
			}
			if !now.Before(m.expires) {
				q.popFront()
				b.deadLetter(q, m, reasonExpired)
				continue
			}
		}
		s := q.nextConsumer()
		if s == nil {
			return
		}
		b.deliverTo(s, q.popFront())
	}
}

// scheduleExpiry arms the queue's timer for its head's deadline. Only the
// head expires, as on RabbitMQ: a per-message TTL behind a longer-lived
// head waits for it.
func (b *Broker) scheduleExpiry(q *queue) {
	if q.deleted || b.closed || q.expiring == 0 {
		return
	}
	at := q.ready.front().expires
	if at.IsZero() || (q.timer != nil && !q.timerAt.After(at)) {
		return
	}
	b.stopTimer(q)
	q.timerGen++
	gen := q.timerGen
	q.timerAt = at
	q.timer = b.clock.schedule(at, func() { b.expiryDue(q, gen) }, &b.wg)
}

func (b *Broker) expiryDue(q *queue, gen uint64) {
	b.lock()
	defer b.unlock()
	if q.timerGen == gen {
		q.timer = nil
	}
	if !b.closed {
		b.dispatch(q)
	}
}

func (b *Broker) stopTimer(q *queue) {
	if q.timer != nil {
		b.clock.stop(q.timer)
		q.timer = nil
	}
}

// requeue puts settled-with-requeue or given-back messages back, marked
// redelivered. A classic queue restores their original order among the
// ready messages. A quorum queue counts the delivery and, as RabbitMQ 3.10
// does (checked against 3.10.8), puts returns at the back of the queue in
// the order they came back, unless it has an x-delivery-limit: then it
// serves them first, and dead-letters a message past the limit.
func (b *Broker) requeue(q *queue, olds []*message) { b.putBack(q, olds, q.hasLimit) }

// returnLost puts back the unsettled deliveries of a channel or
// connection that went away (closed, timed out, refused). On a quorum
// queue they are served first with or without a delivery limit: RabbitMQ
// 3.10.8 returns a lost consumer's messages ahead of the ready ones, where
// a reject or nack with requeue on a queue without a limit goes to the
// back (checked there: ProbationLostReturnsFirst).
func (b *Broker) returnLost(q *queue, olds []*message) { b.putBack(q, olds, true) }

// putBack is requeue and returnLost: first says whether a quorum queue
// serves the returns before its ready messages.
func (b *Broker) putBack(q *queue, olds []*message, first bool) {
	if q.deleted || len(olds) == 0 {
		return
	}
	back := make([]*message, 0, len(olds))
	for _, old := range olds {
		m := old.again()
		if q.quorum {
			m.count++
			if q.hasLimit && int64(m.count) > q.limit {
				b.deadLetter(q, m, reasonDeliveryLimit)
				continue
			}
		}
		back = append(back, m)
	}
	if len(back) == 0 {
		return
	}
	if q.quorum && !first {
		for _, m := range back {
			q.pushBack(m)
		}
		return
	}
	if q.quorum {
		front := make([]*message, 0, q.returned+len(back))
		for range q.returned {
			front = append(front, q.ready.popFront())
		}
		front = append(front, back...)
		for _, m := range front[:q.returned] {
			q.tally(m, -1) // counted again as they are pushed back
		}
		for i := len(front) - 1; i >= 0; i-- {
			q.pushFront(front[i])
		}
		q.returned = len(front)
		return
	}
	slices.SortFunc(back, func(a, b *message) int { return cmpSeq(a.seq, b.seq) })
	last := back[len(back)-1].seq
	var ahead []*message
	for q.ready.len() > 0 && q.ready.front().seq < last {
		ahead = append(ahead, q.popFront())
	}
	merged := make([]*message, 0, len(back)+len(ahead))
	for len(back) > 0 || len(ahead) > 0 {
		if len(ahead) == 0 || (len(back) > 0 && back[0].seq < ahead[0].seq) {
			merged, back = append(merged, back[0]), back[1:]
		} else {
			merged, ahead = append(merged, ahead[0]), ahead[1:]
		}
	}
	for i := len(merged) - 1; i >= 0; i-- {
		q.pushFront(merged[i])
	}
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// deleteQueue removes q and its bindings and cancels its consumers, as
// RabbitMQ's basic.cancel does (their Err is ErrCancelled); its messages,
// unacked ones included, are gone.
func (b *Broker) deleteQueue(q *queue) {
	q.deleted = true
	b.stopTimer(q)
	delete(b.queues, q.name)
	for _, x := range b.exchanges {
		x.unbind(q, "", true)
	}
	for _, s := range slices.Clone(q.consumers) {
		s.cancelledByBroker()
	}
	q.ready.clear()
	q.expiring, q.returned, q.readyBytes, q.rejecting = 0, 0, 0, false
}
