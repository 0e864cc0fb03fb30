package memory

import (
	"context"

	"github.com/acemq/acemq/transport"
)

// DeleteQueue deletes queue as queue.delete does (neither if-unused nor
// if-empty), the way [Broker.DeleteQueue] does: its consumers are
// cancelled, and their subscriptions end with transport.ErrCancelled.
// Deleting a queue that does not exist is no error, as on RabbitMQ.
func (c *Conn) DeleteQueue(ctx context.Context, queue string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b := c.b
	b.lock()
	defer b.unlock()
	if c.closed {
		return transport.ErrClosed
	}
	if q := b.queues[queue]; q != nil {
		if err := lockedFrom(c, q); err != nil {
			return err
		}
		b.deleteQueue(q)
	}
	return nil
}
