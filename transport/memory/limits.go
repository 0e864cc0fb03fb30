package memory

import (
	"fmt"
	"strings"
	"time"
)

// overflow is what a queue at its length limit does with one message more
// (x-overflow).
type overflow uint8

const (
	dropHead         overflow = iota // the default: drop (dead-letter) the oldest ready message
	rejectPublish                    // nack the publish
	rejectPublishDLX                 // nack it and dead-letter it (classic queues only)
)

// overflowNames are the x-overflow values, by overflow.
var overflowNames = [...]string{"drop-head", "reject-publish", "reject-publish-dlx"}

func (o overflow) String() string {
	if int(o) < len(overflowNames) {
		return overflowNames[o]
	}
	return fmt.Sprintf("overflow(%d)", uint8(o))
}

// limited reports whether q has a length limit at all.
func (q *queue) limited() bool { return q.hasMaxLen || q.hasMaxBytes }

// over reports whether q would hold more ready messages or body bytes than
// its limits allow with n more messages of size bytes. As on RabbitMQ
// 3.10, unacked messages do not count, and a message's size is its body.
func (q *queue) over(n int, bytes int64) bool {
	return (q.hasMaxLen && int64(q.ready.len()+n) > q.maxLen) ||
		(q.hasMaxBytes && q.readyBytes+bytes > q.maxBytes)
}

// refuses reports whether q nacks m. A classic queue under reject-publish
// refuses a message that would take it over its limit, even with a
// consumer waiting for it. A quorum queue takes the message that goes
// over and refuses the next ones until enough are consumed
// ([queue.limitReached]).
func (q *queue) refuses(m *message) bool {
	switch {
	case !q.limited() || q.overflow == dropHead:
		return false
	case q.quorum:
		return q.rejecting
	}
	return q.over(1, int64(len(m.body)))
}

// limitReached updates a quorum queue's reject-publish state after its
// ready messages changed, as RabbitMQ 3.10's rabbit_fifo does (checked
// against 3.10.8): it starts refusing once it holds more than its limit,
// and takes publishes again only when it is down to 80% of it (rounded
// down).
func (q *queue) limitReached() {
	if !q.quorum || q.overflow != rejectPublish || !q.limited() {
		return
	}
	below := func(has bool, limit, n int64) bool { return !has || n <= int64(float64(limit)*0.8) }
	switch {
	case q.over(0, 0):
		q.rejecting = true
	case q.rejecting && below(q.hasMaxLen, q.maxLen, int64(q.ready.len())) && below(q.hasMaxBytes, q.maxBytes, q.readyBytes):
		q.rejecting = false
	}
}

// fullness says why q refused a message, for the nack's error.
func (q *queue) fullness() string {
	var limits []string
	if q.hasMaxLen {
		limits = append(limits, fmt.Sprintf("x-max-length %d", q.maxLen))
	}
	if q.hasMaxBytes {
		limits = append(limits, fmt.Sprintf("x-max-length-bytes %d", q.maxBytes))
	}
	return fmt.Sprintf("queue '%s' is full (%s, x-overflow %s)", q.name, strings.Join(limits, ", "), q.overflow)
}

// offer gives q a freshly routed message and reports whether q took it. A
// queue that refuses it (reject-publish) drops it; under
// reject-publish-dlx it is dead-lettered as well, with reason maxlen.
func (b *Broker) offer(q *queue, m *message, ttl time.Duration, hasTTL bool) bool {
	if q.refuses(m) {
		if q.overflow == rejectPublishDLX {
			b.deadLetter(q, m, reasonMaxLen)
		}
		return false
	}
	b.accept(q, m, ttl, hasTTL)
	return true
}

// dropOverflow drops the oldest ready messages of a drop-head queue over
// its limit, dead-lettering them with reason maxlen. RabbitMQ does so
// when a message is enqueued and when deliveries are given back, before
// delivering to its consumers: a message given back to the head of a full
// queue is the one dropped (checked against 3.10.8).
func (b *Broker) dropOverflow(q *queue) {
	if !q.limited() || q.overflow != dropHead {
		return
	}
	for q.ready.len() > 0 && q.over(0, 0) && !q.deleted {
		b.deadLetter(q, q.popFront(), reasonMaxLen)
	}
}
