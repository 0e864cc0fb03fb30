package memory

// Single active consumer (x-single-active-consumer: true), as RabbitMQ
// 3.10.8 runs it under the amqp transport (checked there; the
// conformance cases SingleActiveConsumer*): among the queue's consumers
// only the first registered receives; the others wait, and when it is
// cancelled or closed the next in registration order takes over. What a
// cancelled consumer holds stays unacknowledged on its channel, and comes
// back (redelivered, ahead of the ready messages) only when that closes.
//
// The active subscription takes one delivery at a time, whatever its
// prefetch, unless it was consumed with ConsumeOptions.SingleActive: on
// RabbitMQ the amqp transport consumes at prefetch 1 and, after its
// probation, adds a second consumer on the same channel for the rest of
// the prefetch (probation.go); that one registers after every consumer
// already there and so waits behind them, and the first, at prefetch 1,
// stays the active one for as long as the subscription lives. Told
// SingleActive, it skips the probation and takes up to its prefetch.
//
// Not modelled: RabbitMQ 3.10.8's classic queue serves no one after its
// active consumer is cancelled while holding deliveries, and crashes
// (rabbitmq-server#5460) on the next publish; here the next consumer
// takes over, as a quorum queue does.

// active returns q's single active consumer when it has room, or nil.
func (q *queue) active() *subscription {
	if len(q.consumers) == 0 {
		return nil
	}
	s := q.consumers[0]
	if s.single && s.room() || s.held.live < 1 {
		return s
	}
	return nil
}

// handsOver reports whether cancelling s makes another consumer of q the
// active one, which is then served at once.
func (q *queue) handsOver(s *subscription) bool {
	return q.sac && len(q.consumers) > 1 && q.consumers[0] == s
}
