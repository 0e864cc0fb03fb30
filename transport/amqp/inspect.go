package rabbitmq

import (
	"context"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
)

// inspectors keeps a few idle channels for passive declares, so that
// Inspect, which a scheduled publish makes before every publish, does not
// open and close a channel each time (two round trips and most of a
// scheduled publish's cost). A passive declare of a missing queue closes
// its channel (404): that channel is dropped, never kept. Channels of a
// connection that was replaced are dropped too.
type inspectors struct {
	mu   sync.Mutex
	idle []*amqp.Channel
	gen  uint64 // the connection generation idle belongs to
}

// maxIdleInspectors bounds the idle channels kept: enough for as many
// concurrent publishers as a service usually runs, few against
// RabbitMQ's default limit of 2047 channels a connection.
const maxIdleInspectors = 32

// take returns an idle channel of conn's current connection, or opens one.
func (p *inspectors) take(ctx context.Context, conn *amqpconn.Conn) (*amqp.Channel, error) {
	gen := conn.Generation()
	p.mu.Lock()
	if p.gen != gen {
		p.dropLocked()
		p.gen = gen
	}
	for len(p.idle) > 0 {
		ch := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !ch.IsClosed() {
			p.mu.Unlock()
			return ch, nil
		}
	}
	p.mu.Unlock()
	return conn.Channel(ctx)
}

// give keeps ch for the next Inspect, if it is open, of the current
// connection, and there is room; else closes it.
func (p *inspectors) give(ch *amqp.Channel, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch.IsClosed() || gen != p.gen || len(p.idle) >= maxIdleInspectors {
		closeChannel(ch)
		return
	}
	p.idle = append(p.idle, ch)
}

// close closes every idle channel.
func (p *inspectors) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked()
}

func (p *inspectors) dropLocked() {
	for _, ch := range p.idle {
		closeChannel(ch)
	}
	p.idle = nil
}

// Inspect declares queue passively, on a channel kept for it.
func (t *Transport) Inspect(ctx context.Context, queue string) (transport.QueueInfo, error) {
	if t.isClosed() {
		return transport.QueueInfo{}, transport.ErrClosed
	}
	gen := t.consume.Generation()
	ch, err := t.inspect.take(ctx, t.consume)
	if err != nil {
		return transport.QueueInfo{}, fmt.Errorf("acemq: inspect queue %q: %w", queue, classify(err))
	}
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		closeChannel(ch) // a 404 closed it already
		return transport.QueueInfo{}, fmt.Errorf("acemq: inspect queue %q: %w", queue, classify(err))
	}
	t.inspect.give(ch, gen)
	return transport.QueueInfo{Name: q.Name, Messages: q.Messages, Consumers: q.Consumers}, nil
}
