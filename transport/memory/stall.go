package memory

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/transport"
)

// stall is the broker's stall (Broker.Stall), guarded by b.mu.
type stall struct {
	on     atomic.Bool    // healed != nil, read without the lock by every publish
	healed chan struct{}  // closed by Unstall; nil while not stalled
	limbo  []limboPublish // publishes given up as unknown, taken at Unstall
	since  time.Time      // when the stall began, by the broker's clock
}

// limboPublish is a publish whose outcome its publisher was told is
// unknown, and which its queues get when the stall ends.
type limboPublish struct {
	c      *Conn
	p      transport.Publishing
	m      *message
	ttl    time.Duration
	hasTTL bool
}

// Stall makes the broker take publishes and confirm none, as a RabbitMQ
// node cut off from its cluster's majority does (or one whose VM is
// stopped): a publish waits, unconfirmed, until Unstall or its ctx ends,
// and its message reaches its queues at Unstall either way (the node
// forwards it once the network heals), so a publish given up as unknown
// and published again is delivered twice. Consumers, settles and
// declares go on.
//
// The memory transport sees it as the amqp transport's stall watch does
// (rabbitmq.WithStallAfter), with no delay: while a publish of a
// connection waits, its Check fails with transport.ErrStalled and its
// other publishes are refused unsent with it, so that a stall adds one
// unknown outcome a connection at a time.
func (b *Broker) Stall() {
	b.lock()
	defer b.unlock()
	if b.stall.healed == nil {
		b.stall.healed, b.stall.since = make(chan struct{}), b.clock.Now()
		b.stall.on.Store(true)
	}
}

// Unstall ends Stall: the publishes waiting are routed and confirmed, and
// those given up meanwhile reach their queues.
func (b *Broker) Unstall() {
	b.lock()
	if b.stall.healed == nil {
		b.unlock()
		return
	}
	close(b.stall.healed)
	limbo := b.stall.limbo
	b.stall.on.Store(false)
	b.stall.healed, b.stall.limbo, b.stall.since = nil, nil, time.Time{}
	for _, l := range limbo {
		_, _ = l.c.routeLocked(l.p, l.m, l.ttl, l.hasTTL, Deliver, true)
	}
	calls := b.admitWaiting(false)
	b.unlock()
	calls.run()
}

// waitStalled holds a publish while the broker is stalled. It returns
// nil to go on (the broker is not stalled, or no longer), or the
// publish's error; lost says the publish goes on but its publisher is
// told the outcome is unknown (its ctx ended as the stall did).
func (c *Conn) waitStalled(ctx context.Context, p *transport.Publishing, m *message, ttl time.Duration, hasTTL bool) (lost bool, err error) {
	b := c.b
	if !b.stall.on.Load() {
		return false, nil
	}
	b.lock()
	healed := b.stall.healed
	switch {
	case healed == nil:
		b.unlock()
		return false, nil
	case c.closed:
		b.unlock()
		return false, transport.ErrClosed
	case c.stallWait != nil:
		since := b.stall.since
		b.unlock()
		return false, fmt.Errorf("memory: publish to %s: not sent: %w: no confirm since %s; a publish of this connection waits for one",
			destination(p), transport.ErrStalled, since.Format(time.RFC3339Nano))
	}
	wake := make(chan struct{})
	c.stallWait = wake
	b.unlock()
	select {
	case <-healed:
	case <-wake: // the connection closed
	case <-ctx.Done():
	}
	b.lock()
	defer b.unlock()
	if c.stallWait == wake {
		c.stallWait = nil
	}
	switch {
	case b.stall.healed != healed: // Unstall came, whatever woke it
		if ctx.Err() != nil {
			return true, nil
		}
		return false, nil
	case c.closed:
		b.stall.limbo = append(b.stall.limbo, limboPublish{c, *p, m, ttl, hasTTL})
		return false, fmt.Errorf("memory: publish to %s: %w: the connection closed before the stalled broker confirmed", destination(p), transport.ErrUnconfirmed)
	}
	b.stall.limbo = append(b.stall.limbo, limboPublish{c, *p, m, ttl, hasTTL})
	return false, fmt.Errorf("memory: publish to %s: %w: the broker is stalled: %w", destination(p), transport.ErrUnconfirmed, ctx.Err())
}

// stalledLocked is Check's error while c has a publish waiting on a
// stalled broker, or nil.
func (c *Conn) stalledLocked() error {
	if c.b.stall.healed == nil || c.stallWait == nil {
		return nil
	}
	return fmt.Errorf("memory: %w: a publish waits for a confirm since %s", transport.ErrStalled, c.b.stall.since.Format(time.RFC3339Nano))
}
