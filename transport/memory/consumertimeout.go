package memory

import (
	"time"
)

// WithConsumerTimeout makes the broker treat a delivery left
// unacknowledged for d, on the broker's clock, as RabbitMQ treats one past
// its consumer_timeout: it closes the subscription's channel. Everything
// the subscription held goes back to its queue marked redelivered, and
// settling any of it afterwards is ErrStaleDelivery; deliveries still
// buffered in Deliveries are dropped (they were on that channel too).
//
// The subscription then consumes again at once, at the back of the
// queue's consumers, as the amqp transport's subscription does after the
// broker's 406: Deliveries stays open and Err stays nil; the delivery
// comes back, redelivered, to whoever's turn it is. A subscription with
// ConsumeOptions.OnConsumerTimeout is told d first, as RabbitMQ's reason
// states its timeout, after its channel closed and before anything it held
// is given back.
//
// RabbitMQ 3.10.8 (consumer_timeout in rabbitmq.conf, 30 minutes by
// default) checks on its channel tick, once a minute by default
// (channel_tick_interval), so a channel there closes up to a minute past
// the timeout; this broker closes it at the timeout. Deliveries of Get are
// not timed. A d of zero or less times nothing, the default.
func WithConsumerTimeout(d time.Duration) Option {
	return optionFunc(func(b *Broker) { b.ackBy = consumerTimeout(max(d, 0)) })
}

// consumerTimeout is the broker's WithConsumerTimeout; zero for none.
type consumerTimeout time.Duration

// consumerTimer is a subscription's watch over its oldest unacknowledged
// delivery. Guarded by the broker's lock.
type consumerTimer struct {
	since  map[*message]time.Time // when each delivery it may still hold was made
	timer  *timer                 // due when the oldest one times out; nil when it holds none
	gen    uint64                 // tells a stopped timer's late call from the armed one's
	report func(time.Duration)    // ConsumeOptions.OnConsumerTimeout; nil for none
}

// reportTimeoutsTo makes s tell f of every consumer timeout that closes
// its channel (ConsumeOptions.OnConsumerTimeout).
func (s *subscription) reportTimeoutsTo(f func(time.Duration)) { s.timeout.report = f }

// deliverTo hands m to s and, under a consumer timeout, starts timing it.
func (b *Broker) deliverTo(s *subscription, m *message) {
	b.deliver(s, m)
	if b.ackBy > 0 {
		b.timeDelivery(s, m)
	}
}

// timeDelivery records when m was delivered to s and arms s's timer if it
// was not: while s holds anything the timer is armed for its oldest.
func (b *Broker) timeDelivery(s *subscription, m *message) {
	t := &s.timeout
	now := b.clock.Now()
	if t.since == nil {
		t.since = make(map[*message]time.Time)
	}
	if len(t.since) > 2*s.held.live+64 { // forget what was settled
		for x := range t.since {
			if x.settled || x.held != &s.held {
				delete(t.since, x)
			}
		}
	}
	t.since[m] = now
	if t.timer == nil {
		b.armConsumerTimer(s, now.Add(time.Duration(b.ackBy)))
	}
}

func (b *Broker) armConsumerTimer(s *subscription, at time.Time) {
	t := &s.timeout
	t.gen++
	gen := t.gen
	t.timer = b.clock.schedule(at, func() { b.consumerTimerDue(s, gen) }, &b.wg)
}

// stopConsumerTimer stops s's timer, for good unless s is delivered to
// again.
func (b *Broker) stopConsumerTimer(s *subscription) {
	t := &s.timeout
	t.gen++
	if t.timer != nil {
		b.clock.stop(t.timer)
		t.timer = nil
	}
}

// consumerTimerDue checks s's oldest unacknowledged delivery: past the
// timeout it closes s's channel, else the timer waits for that delivery's
// own deadline. The report to the subscription's user is made without the
// broker's lock (it is the user's code), between the close and the
// consume again: nothing of the closed channel is delivered before it.
func (b *Broker) consumerTimerDue(s *subscription, gen uint64) {
	b.lock()
	t := &s.timeout
	if t.gen != gen || b.closed || s.closed {
		b.unlock()
		return
	}
	t.timer = nil
	oldest := s.oldestUnacked()
	if oldest == nil {
		b.unlock()
		return
	}
	at := t.since[oldest].Add(time.Duration(b.ackBy))
	if b.clock.Now().Before(at) {
		b.armConsumerTimer(s, at)
		b.unlock()
		return
	}
	held := b.timeOut(s)
	report := t.report
	b.unlock()
	if report != nil {
		report(time.Duration(b.ackBy))
	}
	b.lock()
	defer b.unlock()
	b.consumeAgain(s, held)
}

// timeOut closes s's channel as RabbitMQ does past consumer_timeout (406
// PRECONDITION_FAILED, "delivery acknowledgement on channel N timed out"):
// its buffered deliveries are dropped, and what it held is taken from it,
// stale, for consumeAgain to give back; s leaves the queue's consumers.
func (b *Broker) timeOut(s *subscription) []*message {
	clear(s.timeout.since)
	s.dropUnsent() // the closed channel's deliveries, sent or not: stale
	s.q.removeConsumer(s)
	return s.held.takeAll()
}

// consumeAgain gives back what s's closed channel held and consumes again
// on a new one, at the back of the queue's consumers, unless s was
// cancelled or closed meanwhile.
func (b *Broker) consumeAgain(s *subscription, held []*message) {
	if !s.canceled && !s.closed && !b.closed {
		s.q.removeConsumer(s) // never twice
		s.q.consumers = append(s.q.consumers, s)
	}
	b.giveBack(held)
}

// oldestUnacked returns the oldest delivery s holds unsettled, or nil.
func (s *subscription) oldestUnacked() *message {
	for _, m := range s.held.list[s.held.head:] {
		if !m.settled {
			return m
		}
	}
	return nil
}
