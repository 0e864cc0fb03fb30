package memory

// The probation, as the amqp transport runs it (transport/amqp's
// probation.go says why): a subscription with a prefetch over 1 takes one
// delivery at a time while they are redelivered, so that a consumer that
// dies with a poison gives back only the poison, and a quorum queue counts
// a delivery against it alone. The first delivery that is not
// redelivered ends the probation, and from then on the subscription takes
// up to its prefetch. On RabbitMQ the amqp transport then adds a second
// consumer on the same channel (its tag ends in ".rest") at the prefetch
// less one, so a subscription whose probation ended counts as two
// consumers in Inspect, here as there.

// room reports whether s may be sent one delivery more.
func (s *subscription) room() bool {
	if s.probation {
		return s.held.live < 1
	}
	return s.held.live < s.prefetch
}

// consumerCount is the number of consumers RabbitMQ would show on q.
func (q *queue) consumerCount() int {
	if q.sac && q.quorum {
		// A quorum queue counts its active consumer alone; the
		// waiting ones, and the active one's second (singleactive.go),
		// are not shown (RabbitMQ 3.10.8).
		return min(len(q.consumers), 1)
	}
	n := len(q.consumers)
	for _, s := range q.consumers {
		if !s.probation && !s.single && s.prefetch > 1 {
			n++
		}
	}
	return n
}
