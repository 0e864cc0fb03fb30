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
// Returns are correlated by the message's x-acemq-id when no other publish
// in flight on the channel carries the same id (the common case: every
// message the library publishes has a fresh or a stable id, and only a
// republish of one id races itself), and otherwise by the seqHeader id the
// transport adds. So most messages go out as the caller built them, with
// no header of the transport's: no copy of the table, and no bytes more on
// the wire. An id whose publish was forgotten before its confirm came (ctx
// ended, no confirm in time) stays taken on the channel, since its return
// may still come: a later publish of it goes by seqHeader.
//
// The broker sends basic.return before the ack of the same message, and
// amqp091-go hands both over from one reader goroutine: the return is in
// the returns buffer before the deferred confirmation is done. So a
// publisher that sees its confirmation done and then drains the buffer
// (under mu) always finds its return there or already recorded. Draining
// is done only under mu, never by a goroutine blocked on the channel, so a
// return is never in the hands of someone who has not recorded it yet.
type confirmCh struct {
	ch       *amqp.Channel
	frameMax int // negotiated by its connection: a content header must fit

	mu      sync.Mutex
	returns chan amqp.Return // nil once amqp091-go has closed it
	pending map[uint64]bool  // publishes in flight by seq → returned
	byID    map[string]idState
	ghosts  int              // entries of byID forgotten before their confirm
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
		byID:     make(map[string]idState),
		closes:   ch.NotifyClose(make(chan *amqp.Error, 1)),
	}, nil
}

// idState is where a publish known by its id stands.
type idState uint8

const (
	idWaiting  idState = iota // sent, no return seen
	idReturned                // the broker returned it
	idGhost                   // forgotten before its confirm: its return may still come
)

// maxGhosts bounds the ids a channel keeps for publishes forgotten before
// their confirm; past it the channel is retired (a new one starts empty).
const maxGhosts = 4096

// ticket is how a mandatory publish in flight on a channel is known again
// when the broker returns it: by seq, carried in seqHeader, or when seq is
// 0 by id. The zero ticket is a publish that cannot come back (not
// mandatory).
type ticket struct {
	seq uint64
	id  string
}

// register records a publish about to be sent on c: by id when id is not
// "" and no publish on c holds it, else by a seq taken from seqs, which
// the caller must then send in seqHeader. A publish that is not mandatory
// is never returned and gets the zero ticket.
func (c *confirmCh) register(mandatory bool, id string, seqs *atomic.Uint64) ticket {
	if !mandatory {
		return ticket{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id != "" {
		if _, taken := c.byID[id]; !taken {
			c.byID[id] = idWaiting
			return ticket{id: id}
		}
	}
	seq := seqs.Add(1)
	c.pending[seq] = false
	return ticket{seq: seq}
}

// forget drops a publish whose return no longer matters. resolved says
// its confirmation is done (a nack, a close): its return, if any, is
// already in the buffer, and is drained with it. An unresolved publish
// (not sent, ctx ended, no confirm in time) known by its id leaves the id
// taken, since its return may still come; crowded reports that c holds
// more such ids than maxGhosts, and should be retired.
func (c *confirmCh) forget(t ticket, resolved bool) (crowded bool) {
	switch {
	case t.seq != 0:
		c.mu.Lock()
		delete(c.pending, t.seq)
		c.mu.Unlock()
	case t.id != "":
		c.mu.Lock()
		defer c.mu.Unlock()
		if resolved {
			c.drainLocked()
			delete(c.byID, t.id)
			return false
		}
		c.byID[t.id] = idGhost
		c.ghosts++
		return c.ghosts > maxGhosts
	}
	return false
}

// settle forgets t and reports whether the broker returned it. Call it
// once the publish's deferred confirmation is done.
func (c *confirmCh) settle(t ticket) (returned bool) {
	if t == (ticket{}) {
		return false // not mandatory: never returned
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainLocked()
	if t.seq != 0 {
		returned = c.pending[t.seq]
		delete(c.pending, t.seq)
		return returned
	}
	returned = c.byID[t.id] == idReturned
	delete(c.byID, t.id)
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
			c.recordLocked(r.Headers)
		default:
			return
		}
	}
}

// recordLocked marks the publish a return's headers name as returned: by
// seqHeader when it carries one, else by its id. A return of a publish
// forgotten, or of one no longer in flight, changes nothing.
func (c *confirmCh) recordLocked(h amqp.Table) {
	if seq, found := returnSeq(h); found {
		if _, waiting := c.pending[seq]; waiting {
			c.pending[seq] = true
		}
		return
	}
	if id, ok := h[idHeader].(string); ok {
		if st, known := c.byID[id]; known && st == idWaiting {
			c.byID[id] = idReturned
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
