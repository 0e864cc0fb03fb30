package rabbitmq

import (
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
)

// The probation: every channel a subscription consumes on (at Consume and
// after every reconnect) starts at basic.qos 1 and stays there while the
// deliveries it gets are redelivered, so that a message that takes the
// process or the connection down (a handler that crashes it, headers
// amqp091-go cannot read) is the only one in flight when it does. When a
// connection dies RabbitMQ returns every delivery unacknowledged on it,
// and a quorum queue counts a delivery against each: with the whole
// prefetch in flight a poison spent the delivery limit of every message
// sent with it, and after a few restarts dead-lettered them all. On
// probation a poison at the head of the queue (a quorum queue with a
// delivery limit serves returned messages first) spends its own budget
// only, and a redelivered message behind it waits until it is settled.
//
// The first delivery that is not redelivered ends it (no returned message
// waits ahead of it): a second consumer, rest, is added on the same
// channel at the prefetch less one, so that the two together hold the
// prefetch, exactly, from then on. basic.qos with global false only
// applies to consumers created after it, so raising the first one's is no
// use; quorum queues refuse global qos. Nor can the first be cancelled and
// consumed again at the full prefetch: that one's deliveries, still
// unacknowledged, would not count against the new one's prefetch (one
// more than the prefetch in flight), and RabbitMQ 3.10.8 fails the
// channel (541 INTERNAL_ERROR) when a quorum queue's consumer tag is used
// again while the cancelled consumer still has deliveries unacknowledged.
// Two consumers on one channel share its delivery tags (dense, in the
// order the broker sent them), so the ack ledger does not change, and
// forward hands their deliveries on in tag order. The cost is one
// basic.qos and one basic.consume per channel, once.
//
// A single-active-consumer queue (ConsumeOptions.SingleActive) gets no
// probation: the broker delivers to one consumer of the queue, the first
// registered, so the second would wait behind every other consumer and
// the subscription would stay at prefetch 1 for as long as it lives.
// Such a subscription consumes at its prefetch from the start.
//
// Redelivered alone says a delivery was returned: RabbitMQ 3.10.8 sets it
// on every return, and a quorum queue adds x-delivery-count then. That
// header alone is not read: a foreign publisher may have copied it onto a
// fresh message, which would hold the subscription at prefetch 1.

// restSuffix makes the second consumer's tag from the subscription's.
const restSuffix = ".rest"

// restTag is the consumer tag of tag's second consumer. A consumer tag is
// a short string, 255 bytes at most: a longer one is refused before it is
// sent, and the subscription stays on its first consumer alone.
func restTag(tag string) string { return tag + restSuffix }

// endProbation adds c's second consumer, at the prefetch less one, unless
// Cancel or Close came first. When that fails the channel is closed (if
// the broker did not close it already), so that run consumes again on a
// new one, on probation again.
func (s *subscription) endProbation(c *consumeCh) {
	c.probation = false // at most once per channel, whatever comes next
	tag := restTag(s.tag)
	if len(tag) > 255 {
		s.log.Warn("acemq: the consumer tag is too long to add a second consumer after the probation; consuming at prefetch 1",
			zap.Int("tag_bytes", len(s.tag)))
		return
	}
	s.rpc.Lock()
	defer s.rpc.Unlock()
	if s.asked() {
		return
	}
	err := c.ch.Qos(s.prefetch-1, 0, false)
	var rest <-chan amqp.Delivery
	if err == nil {
		rest, err = c.ch.Consume(s.queue, tag, false, false, false, false, nil)
	}
	if err != nil {
		if !c.ch.IsClosed() {
			s.log.Warn("acemq: adding the second consumer after the probation failed; consuming again on a new channel",
				zap.Error(classify(err)))
			closeChannel(c.ch)
		}
		return
	}
	c.rest, c.restTag = rest, tag
	s.mu.Lock()
	s.restTag = tag
	s.mu.Unlock()
	c.ledger.setPrefetch(s.prefetch)
}

// hand hands d on in delivery-tag order: d, and what waited for it, or
// else d waits for the tags before it, which the other consumer got. It
// returns false when halt came first.
func (s *subscription) hand(c *consumeCh, d amqp.Delivery) bool {
	if c.next != 0 && d.DeliveryTag != c.next {
		if c.pending == nil {
			c.pending = make(map[uint64]amqp.Delivery)
		}
		c.pending[d.DeliveryTag] = d
		return true
	}
	for {
		select {
		case s.out <- toDelivery(c.ch, c.ledger, s.queue, &d):
		case <-s.stop:
			return false
		}
		c.next = d.DeliveryTag + 1
		var ok bool
		if d, ok = c.pending[c.next]; !ok {
			return true
		}
		delete(c.pending, c.next)
	}
}

// handPending hands on, in tag order, what still waits once both
// consumers' deliveries closed: nothing, unless a tag never came, which
// only a channel that closed loses (and then all of them are stale).
func (s *subscription) handPending(c *consumeCh) bool {
	for len(c.pending) > 0 && !c.ch.IsClosed() {
		low := uint64(0)
		for tag := range c.pending {
			if low == 0 || tag < low {
				low = tag
			}
		}
		d := c.pending[low]
		delete(c.pending, low)
		c.next = low
		if !s.hand(c, d) {
			return false
		}
	}
	clear(c.pending)
	return true
}

// passCancels tells ended of a basic.cancel the broker sent either
// consumer (amqp091-go sends it before it closes that consumer's
// deliveries), as a cancel of the subscription's tag.
func (c *consumeCh) passCancels(tag string) {
	for {
		select {
		case t, ok := <-c.rawCancels:
			if !ok {
				return // closed with the channel
			}
			if t == tag || (t != "" && t == c.restTag) {
				select {
				case c.passCancel <- tag:
				default:
				}
			}
		default:
			return
		}
	}
}
