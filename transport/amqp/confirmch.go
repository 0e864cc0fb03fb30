package rabbitmq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/acemq/acemq/internal/amqpconn"
	amqp "github.com/rabbitmq/amqp091-go"
)

// confirmCh is one channel in confirm mode with its returns.
//
// Returns are correlated by the seqHeader id. The broker sends basic.return
// before the ack of the same message, and amqp091-go hands both over from
// one reader goroutine: the return is in the returns buffer before the
// deferred confirmation is done. So a publisher that sees its confirmation
// done and then drains the buffer (under mu) always finds its return there
// or already recorded. Draining is done only under mu, never by a goroutine
// blocked on the channel, so a return is never in the hands of someone who
// has not recorded it yet.
type confirmCh struct {
	ch       *amqp.Channel
	frameMax int // negotiated by its connection: a content header must fit

	mu      sync.Mutex
	returns chan amqp.Return // nil once amqp091-go has closed it
	pending map[uint64]bool  // publishes in flight → returned
	closes  chan *amqp.Error // why the channel closed, sent before confirms resolve
	reason  *amqp.Error

	inFlight atomic.Int64 // publishes sent and not yet settled
	retired  atomic.Bool  // no new publishes: close once inFlight is 0
	closing  sync.Once
}

func openConfirmCh(ctx context.Context, conn *amqpconn.Conn, returnsBuf int) (*confirmCh, error) {
	// The frame size is read from the connection the channel is opened
	// on, or from the one before it if a reconnect comes between: nodes of
	// one cluster, configured alike, negotiate the same.
	//
	// A reconnect the broker refuses for good (the user's access to the
	// vhost withdrawn, the vhost deleted) ends the wait at once with the
	// broker's reason: no publish can succeed until an operator acts, and
	// waiting out the caller's whole deadline only hides why. One refused
	// for now (a connection limit) is waited out as before.
	c, err := conn.ConnectionUnlessRefused(ctx)
	if err != nil {
		return nil, err
	}
	frameMax := c.Config.FrameSize
	ch, err := conn.ChannelUnlessRefused(ctx)
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("confirm.select: %w", err)
	}
	return &confirmCh{
		ch:       ch,
		frameMax: frameMax,
		returns:  ch.NotifyReturn(make(chan amqp.Return, returnsBuf)),
		pending:  make(map[uint64]bool),
		closes:   ch.NotifyClose(make(chan *amqp.Error, 1)),
	}, nil
}

func (c *confirmCh) register(seq uint64) {
	if seq == 0 {
		return
	}
	c.mu.Lock()
	c.pending[seq] = false
	c.mu.Unlock()
}

func (c *confirmCh) forget(seq uint64) {
	if seq == 0 {
		return
	}
	c.mu.Lock()
	delete(c.pending, seq)
	c.mu.Unlock()
}

// settle forgets seq and reports whether the broker returned it. Call it
// once the publish's deferred confirmation is done.
func (c *confirmCh) settle(seq uint64) (returned bool) {
	if seq == 0 {
		return false // not mandatory: never returned
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainLocked()
	returned = c.pending[seq]
	delete(c.pending, seq)
	return returned
}

// closeReason is the error the channel was closed with, nil for a clean
// close. amqp091-go sends it before it resolves the pending confirmations,
// so it is there by the time a publisher sees its confirmation done.
func (c *confirmCh) closeReason() *amqp.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reason == nil {
		select {
		case e := <-c.closes:
			c.reason = e
		default:
		}
	}
	return c.reason
}

// drain records whatever returns are buffered, so that the buffer never
// stays full (amqp091-go drops an event after 5s on a full listener).
func (c *confirmCh) drain() {
	c.mu.Lock()
	c.drainLocked()
	c.mu.Unlock()
}

func (c *confirmCh) drainLocked() {
	for {
		select {
		case r, ok := <-c.returns:
			if !ok {
				c.returns = nil
				return
			}
			seq, found := returnSeq(r.Headers)
			if _, waiting := c.pending[seq]; found && waiting {
				c.pending[seq] = true
			}
		default:
			return
		}
	}
}

// returnSeq reads the publish id back from a returned message.
func returnSeq(h amqp.Table) (uint64, bool) {
	switch v := h[seqHeader].(type) {
	case int64:
		return uint64(v), true
	case int32:
		return uint64(v), true
	default:
		return 0, false
	}
}

// begin counts a publish about to be sent on c.
func (c *confirmCh) begin() { c.inFlight.Add(1) }

// end counts a publish on c settled, and closes c with close if it was
// the last on a retired channel.
func (c *confirmCh) end(close func(*confirmCh)) {
	if c.inFlight.Add(-1) == 0 && c.retired.Load() {
		c.closing.Do(func() { close(c) })
	}
}

// slot holds one position of the publish pool: a confirm channel that is
// reopened when it dies or is retired.
type slot struct {
	lock chan struct{} // a mutex that honours ctx while a channel opens
	cur  atomic.Pointer[confirmCh]
}

func newSlot() *slot { return &slot{lock: make(chan struct{}, 1)} }

// get returns the slot's live channel, opening one if needed.
func (s *slot) get(ctx context.Context, conn *amqpconn.Conn, returnsBuf int) (*confirmCh, error) {
	if c := s.cur.Load(); c != nil && !c.ch.IsClosed() {
		return c, nil
	}
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.lock }()
	if c := s.cur.Load(); c != nil && !c.ch.IsClosed() {
		return c, nil
	}
	c, err := openConfirmCh(ctx, conn, returnsBuf)
	if err != nil {
		return nil, err
	}
	s.cur.Store(c)
	return c, nil
}

// retire takes c out of the slot after a nack, so that the next publish
// opens a new channel, and closes c with close once its last publish in
// flight has settled. RabbitMQ nacks when a queue could not take a
// message, which is usually passing; but a channel that was opened while
// a quorum queue elected its leader can go on nacking every publish
// (RabbitMQ 3.10, seen in a three-node cluster whose leader was killed)
// while a new channel on the same node publishes fine.
func (s *slot) retire(c *confirmCh, close func(*confirmCh)) {
	s.cur.CompareAndSwap(c, nil)
	c.retired.Store(true)
	if c.inFlight.Load() == 0 {
		c.closing.Do(func() { close(c) })
	}
}
