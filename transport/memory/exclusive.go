package memory

import (
	"fmt"

	"github.com/acemq/acemq/transport"
)

// An exclusive queue belongs to the connection that declared it, as on
// RabbitMQ: it is deleted when that connection closes, and another
// connection that declares it, inspects it, consumes from it, takes from
// it or deletes it is refused with RESOURCE_LOCKED. Publishing to it is
// anyone's.

// ownerOf is the owner a declaration gives its queue: c when it is
// exclusive, nobody otherwise.
func ownerOf(d transport.Queue, c *Conn) *Conn {
	if d.Exclusive {
		return c
	}
	return nil
}

// lookupFor is lookup by the connection c, which may not use another
// connection's exclusive queue.
func (b *Broker) lookupFor(c *Conn, name string) (*queue, error) {
	q, err := b.lookup(name)
	if err != nil {
		return nil, err
	}
	if err := lockedFrom(c, q); err != nil {
		return nil, err
	}
	return q, nil
}

// lockedFrom refuses c another connection's exclusive queue q.
func lockedFrom(c *Conn, q *queue) error {
	if q.owner != nil && q.owner != c {
		return locked(q)
	}
	return nil
}

// locked is RabbitMQ's refusal, in its words (3.10.8, which adds the
// vhost).
func locked(q *queue) error {
	return fmt.Errorf("%w: cannot obtain exclusive access to locked queue '%s'. It could be originally declared on another connection or the exclusive property value does not match that of the original declaration.", transport.ErrResourceLocked, q.name)
}
