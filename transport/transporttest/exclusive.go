package transporttest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/acemq/acemq/transport"
)

// testExclusiveQueue: an exclusive queue is its declaring connection's.
// Another connection is refused RESOURCE_LOCKED when it declares it,
// inspects it, consumes from it, takes from it or deletes it, but may
// publish to it; the owner inspects it; and it goes when its
// owner closes (RabbitMQ deletes it as the connection ends, a moment after
// close-ok, hence the wait).
func testExclusiveQueue(t *testing.T, e *env) {
	owner, other := e.conn(), e.conn()
	q := e.name("mine")
	e.declare(owner, transport.Topology{Queues: []transport.Queue{{Name: q, Exclusive: true}}})
	e.declare(owner, transport.Topology{Queues: []transport.Queue{{Name: q, Exclusive: true}}}) // the owner again: nothing changes

	err := other.Declare(e.ctx(), transport.Topology{Queues: []transport.Queue{{Name: q, Exclusive: true}}})
	e.wantErr("another connection declaring the exclusive queue", err, transport.ErrResourceLocked)
	err = other.Declare(e.ctx(), transport.Topology{Queues: []transport.Queue{{Name: q}}})
	e.wantErr("another connection declaring it not exclusive", err, transport.ErrResourceLocked)
	_, err = other.Inspect(e.ctx(), q)
	e.wantErr("another connection inspecting it", err, transport.ErrResourceLocked)
	_, err = other.Consume(e.ctx(), q, transport.ConsumeOptions{})
	e.wantErr("another connection consuming from it", err, transport.ErrResourceLocked)
	_, _, err = other.Get(e.ctx(), q)
	e.wantErr("another connection taking from it", err, transport.ErrResourceLocked)
	if del, ok := other.(transport.QueueDeleter); ok {
		e.wantErr("another connection deleting it", del.DeleteQueue(e.ctx(), q), transport.ErrResourceLocked)
	}
	if c := e.publish(other, transport.Publishing{RoutingKey: q, Body: []byte("from another"), Mandatory: true}); !c.Routed {
		t.Fatalf("a publish from another connection was not routed to the exclusive queue: %+v", c)
	}

	e.depth(owner, q, 1) // the owner inspects it (it does not consume: a transport may consume on connections of their own)

	if err := owner.Close(); err != nil {
		t.Fatalf("close the owner: %v", err)
	}
	e.eventually(func() (bool, string) {
		_, err := other.Inspect(e.ctx(), q)
		return errors.Is(err, transport.ErrNotFound), fmt.Sprintf("after its owner closed, Inspect says %v; want the queue gone (not found)", err)
	})
	// Gone, it is anyone's name again.
	e.declare(other, transport.Topology{Queues: []transport.Queue{{Name: q, Exclusive: true}}})
}
