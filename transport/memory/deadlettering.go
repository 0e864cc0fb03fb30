package memory

// DeadLettering returns the messages queue holds waiting to be
// dead-lettered at least once: dead-lettered (expired, rejected) while
// its dead-letter exchange was missing, routed nowhere, or led to a queue
// that refused them (full under reject-publish), and offered again every
// 3 minutes of the broker's clock. They are neither ready (Depth) nor
// unacked (Unacked): RabbitMQ's management API lists them as messages_dlx,
// and a passive declare does not count them. A missing queue holds none.
func (b *Broker) DeadLettering(queue string) int {
	b.lock()
	defer b.unlock()
	if q := b.queues[queue]; q != nil {
		return len(q.held)
	}
	return 0
}
