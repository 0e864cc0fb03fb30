package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/acemq/acemq/transport"
)

// User is the user every connection is authenticated as. A publish whose
// UserID names anyone else is refused, as RabbitMQ refuses it.
const User = "guest"

// Conn is one connection to a [Broker]: a [transport.Transport] that tells
// time by the broker's clock. Get deliveries belong to the connection,
// consumer deliveries to their subscription; closing either gives its
// unsettled deliveries back.
type Conn struct {
	b *Broker

	// guarded by b.mu
	closed    bool
	subs      []*subscription
	gets      holder
	stallWait chan struct{} // a publish waits on a stalled broker (stall.go); closed as c closes
}

var (
	_ transport.Transport = (*Conn)(nil)
	_ transport.Clocked   = (*Conn)(nil)
)

// Clock returns the broker's clock.
func (c *Conn) Clock() transport.Clock { return c.b.clock }

// Declare applies t in order (exchanges, queues, bindings) and stops at
// the first refusal: ErrPreconditionFailed naming the queue and argument
// for an inequivalent redeclare, ErrAccessRefused for the default exchange
// or an amq.* name, ErrNotFound for a binding to something missing. As on
// RabbitMQ a refusal affects only that call.
func (c *Conn) Declare(ctx context.Context, t transport.Topology) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.b.lock()
	defer c.b.unlock()
	if c.closed {
		return transport.ErrClosed
	}
	return c.b.declare(t, c)
}

// Inspect reports a queue's ready messages and consumers; a missing queue
// is ErrNotFound.
func (c *Conn) Inspect(ctx context.Context, queue string) (transport.QueueInfo, error) {
	if err := ctx.Err(); err != nil {
		return transport.QueueInfo{}, err
	}
	c.b.lock()
	defer c.b.unlock()
	if c.closed {
		return transport.QueueInfo{}, transport.ErrClosed
	}
	q, err := c.b.lookupFor(c, queue)
	if err != nil {
		return transport.QueueInfo{}, err
	}
	return transport.QueueInfo{Name: q.name, Messages: q.ready.len(), Consumers: q.consumerCount()}, nil
}

// Publish routes p and confirms at once. A mandatory publish that reached
// no queue is Routed false with no error; a publish that is not mandatory
// is always Routed true, since RabbitMQ would not say. A missing exchange
// is ErrNotFound; a header type AMQP cannot carry is an error before
// anything is routed, and so, as a *transport.LimitError, is what the amqp
// transport refuses before it writes a frame: a property or header name
// over 255 bytes, headers nested deeper than 32 or with more than 8192
// entries in one table or array, a content header too large for
// [FrameMax]. A queue over its x-max-length or x-max-length-bytes under
// x-overflow reject-publish refuses the message: ErrNacked, though the
// other queues it was routed to took it, as on RabbitMQ. The broker's
// publish fault function ([Broker.SetPublishFault]) may make it fail
// otherwise, and a stalled broker ([Broker.Stall]) holds it unconfirmed.
func (c *Conn) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	if err := ctx.Err(); err != nil {
		return transport.Confirmation{}, fmt.Errorf("%w: %w", transport.ErrUnconfirmed, err)
	}
	m, ttl, hasTTL, err := newMessage(p)
	if err != nil {
		return transport.Confirmation{}, err
	}
	fault := c.askFault(p)
	switch fault {
	case Deliver, LoseConfirm:
	default:
		return transport.Confirmation{}, faultErr(&p, fault)
	}
	lost, err := c.waitStalled(ctx, &p, m, ttl, hasTTL)
	if err != nil {
		return transport.Confirmation{}, err
	}
	if lost {
		fault = LoseConfirm
	}
	c.b.lock()
	defer c.b.unlock()
	return c.routeLocked(p, m, ttl, hasTTL, fault, false)
}

// routeLocked routes m, p's message, into its queues and says how that
// went; evenClosed routes it through a closed connection too (a stalled
// broker's publish, taken at Unstall).
func (c *Conn) routeLocked(p transport.Publishing, m *message, ttl time.Duration, hasTTL bool, fault Fault, evenClosed bool) (transport.Confirmation, error) {
	b := c.b
	if c.closed && !evenClosed {
		return transport.Confirmation{}, transport.ErrClosed
	}
	targets, ok := b.route(p.Exchange, m.routes())
	if !ok {
		return transport.Confirmation{}, fmt.Errorf("%w: no exchange '%s'", transport.ErrNotFound, p.Exchange)
	}
	var tmpl message
	if len(targets) > 1 {
		tmpl = *m
	}
	var refused *queue
	for i, q := range targets {
		n := m
		if i > 0 {
			n = new(message)
			*n = tmpl     // headers and body are shared: never changed once stored
			n.spare = nil // the first message's alone
		}
		if !b.offer(q, n, ttl, hasTTL) && refused == nil {
			refused = q
		}
	}
	switch {
	case fault == LoseConfirm:
		return transport.Confirmation{}, faultErr(&p, fault)
	case refused != nil:
		return transport.Confirmation{}, fmt.Errorf("memory: publish to %s: %w: %s",
			destination(&p), transport.ErrNacked, refused.fullness())
	}
	return transport.Confirmation{Routed: len(targets) > 0 || !p.Mandatory}, nil
}

// newMessage validates and copies p. The per-message TTL comes from the
// Expiration property.
func newMessage(p transport.Publishing) (m *message, ttl time.Duration, hasTTL bool, err error) {
	blk, bodyRoom := newBlock(p.Body)
	var room fields
	if len(p.Headers) <= len(blk.fields) {
		room = blk.fields[:0:len(blk.fields)]
	}
	headers, keys, err := storeHeaders(p.Headers, p.RoutingKey, room)
	if err != nil {
		if errors.Is(err, transport.ErrPreconditionFailed) {
			return nil, 0, false, err
		}
		return nil, 0, false, fmt.Errorf("memory: headers: %w", err)
	}
	if err := checkLimits(&p); err != nil {
		return nil, 0, false, err
	}
	if p.UserID != "" && p.UserID != User {
		return nil, 0, false, fmt.Errorf("%w: user_id property set to '%s' but authenticated user was '%s'",
			transport.ErrPreconditionFailed, p.UserID, User)
	}
	if p.Expiration != "" {
		ms, err := strconv.ParseInt(p.Expiration, 10, 64)
		if err != nil || ms < 0 {
			return nil, 0, false, fmt.Errorf("%w: invalid expiration '%s'", transport.ErrPreconditionFailed, p.Expiration)
		}
		ttl, hasTTL = time.Duration(ms)*time.Millisecond, true
	}
	m = &blk.message
	*m = message{stored: stored{
		exchange:   p.Exchange,
		routingKey: p.RoutingKey,
		keys:       keys,
		headers:    headers,
		props:      p.Properties,
	}}
	m.props.Timestamp = wholeSeconds(m.props.Timestamp)
	switch n := len(p.Body); {
	case p.Body == nil:
	case bodyRoom != nil:
		copy(bodyRoom, p.Body)
		copy(bodyRoom[n:], p.Body)
		m.body, m.spare = bodyRoom[:n:n], bodyRoom[n:2*n:2*n]
	case n <= maxSpare:
		both := make([]byte, 2*n)
		copy(both, p.Body)
		copy(both[n:], p.Body)
		m.body, m.spare = both[:n:n], both[n:]
	default:
		m.body = append(make([]byte, 0, n), p.Body...)
	}
	return m, ttl, hasTTL, nil
}

// messageBlock is a message and room for its headers, allocated together:
// one allocation where a message and its headers' slice would be two. The
// headers of a stored message never change, so the copies of it that
// share them (requeued, fanned out) keep the block alive without harm.
type messageBlock struct {
	message
	fields [8]field
}

// blockWithBody64, 128 and 256 are a message block with room for
// a small body and its spare copy: one allocation for the whole message.
type blockWithBody64 struct {
	messageBlock
	body [2 * 64]byte
}

type blockWithBody128 struct {
	messageBlock
	body [2 * 128]byte
}

type blockWithBody256 struct {
	messageBlock
	body [2 * 256]byte
}

// newBlock allocates the block for a message with body, and room for body
// twice in it when body is small; nil room when it is not.
func newBlock(body []byte) (*messageBlock, []byte) {
	switch n := len(body); {
	case body == nil:
	case n <= 64:
		b := new(blockWithBody64)
		return &b.messageBlock, b.body[:2*n]
	case n <= 128:
		b := new(blockWithBody128)
		return &b.messageBlock, b.body[:2*n]
	case n <= 256:
		b := new(blockWithBody256)
		return &b.messageBlock, b.body[:2*n]
	}
	return new(messageBlock), nil
}

// maxSpare bounds the bodies stored with a spare copy for their first
// delivery (message.spare): under it, a stored message costs its body
// twice until that delivery, for one allocation less per message.
const maxSpare = 16 << 10

// Consume subscribes to queue; a missing queue is ErrNotFound. Deliveries
// are pushed as the queue fills and as earlier ones are settled: no
// goroutine runs on the subscription's behalf.
func (c *Conn) Consume(ctx context.Context, queue string, opts transport.ConsumeOptions) (transport.Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	prefetch := opts.Prefetch
	switch {
	case prefetch == 0:
		prefetch = 1
	case prefetch < 0 || prefetch > 65535:
		return nil, fmt.Errorf("memory: prefetch %d is outside 0..65535", opts.Prefetch)
	}
	b := c.b
	b.lock()
	defer b.unlock()
	if c.closed {
		return nil, transport.ErrClosed
	}
	q, err := b.lookupFor(c, queue)
	if err != nil {
		return nil, err
	}
	if err := b.refuseConsume(); err != nil { // connlimit.go
		return nil, fmt.Errorf("memory: consume queue %q: %w", queue, err)
	}
	tag := opts.Tag
	for _, s := range c.subs {
		if tag != "" && s.tag == tag {
			return nil, fmt.Errorf("memory: attempt to reuse consumer tag '%s'", tag)
		}
	}
	if tag == "" {
		b.tags++
		tag = "amq.ctag-memory-" + strconv.FormatUint(b.tags, 10)
	}
	s := &subscription{c: c, q: q, tag: tag, prefetch: prefetch, single: opts.SingleActive,
		probation: prefetch > 1 && !opts.SingleActive, // probation.go
		ch:        make(chan transport.Delivery, prefetch), ended: make(chan struct{})}
	b.watchRefusals(s, opts.OnRefused)
	s.reportTimeoutsTo(opts.OnConsumerTimeout)
	c.subs = append(c.subs, s)
	q.consumers = append(q.consumers, s)
	b.dispatch(q)
	return s, nil
}

// Get takes the message at the head of queue (basic.get), unacked on this
// connection until settled; ok is false when the queue is empty.
func (c *Conn) Get(ctx context.Context, queue string) (transport.Delivery, bool, error) {
	if err := ctx.Err(); err != nil {
		return transport.Delivery{}, false, err
	}
	b := c.b
	b.lock()
	defer b.unlock()
	if c.closed {
		return transport.Delivery{}, false, transport.ErrClosed
	}
	q, err := b.lookupFor(c, queue)
	if err != nil {
		return transport.Delivery{}, false, err
	}
	m := q.popFront()
	if m == nil {
		return transport.Delivery{}, false, nil
	}
	c.gets.add(m)
	q.unacked++
	q.limitReached()
	b.scheduleExpiry(q)
	return b.delivery(m, m), true, nil
}

// Close cancels every subscription and gives back every unsettled
// delivery, marked redelivered; later calls return ErrClosed. It is
// idempotent.
func (c *Conn) Close() error {
	c.b.lock()
	c.b.closeConn(c)
	calls := c.b.admitWaiting(false) // its connections made room
	c.b.unlock()
	calls.run()
	return nil
}

func (b *Broker) closeConn(c *Conn) {
	if c.closed {
		return
	}
	c.closed = true
	if c.stallWait != nil {
		close(c.stallWait)
		c.stallWait = nil
	}
	delete(b.conns, c)
	for _, s := range slices.Clone(c.subs) {
		s.closeLocked()
	}
	c.subs = nil
	b.giveBack(c.gets.takeAll())
	for _, q := range b.queues {
		if q.owner == c {
			b.deleteQueue(q) // exclusive.go
		}
	}
}

// giveBack requeues given-back deliveries to their queues.
func (b *Broker) giveBack(ms []*message) {
	byQueue := map[*queue][]*message{}
	var order []*queue
	for _, m := range ms {
		if _, ok := byQueue[m.q]; !ok {
			order = append(order, m.q)
		}
		byQueue[m.q] = append(byQueue[m.q], m)
		m.q.unacked--
	}
	for _, q := range order {
		b.returnLost(q, byQueue[q])
		b.dispatch(q)
	}
}

// lookup returns a live queue, expiring what is due at its head first.
func (b *Broker) lookup(name string) (*queue, error) {
	q := b.queues[name]
	if q == nil {
		return nil, fmt.Errorf("%w: no queue '%s'", transport.ErrNotFound, name)
	}
	b.dispatch(q)
	return q, nil
}

// Check says whether the connection can work: nil until it is closed.
func (c *Conn) Check() error {
	c.b.lock()
	defer c.b.unlock()
	if c.closed {
		return transport.ErrClosed
	}
	return c.stalledLocked()
}

var _ transport.Checker = (*Conn)(nil)
