package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
)

// drainEvery is how often idle confirm channels have their returns drained;
// well under amqp091-go's 5s drop timeout.
const drainEvery = 500 * time.Millisecond

// maxSendAttempts bounds the retries of a publish that could not be sent
// because its channel was already closed (a message not sent is safe to
// send again on a fresh channel).
const maxSendAttempts = 3

// publisher is the pool of confirm channels on the publish connection.
type publisher struct {
	conn           *amqpconn.Conn
	window         chan struct{} // one token per publish awaiting a confirm
	confirmTimeout time.Duration
	slots          []*slot
	seq            atomic.Uint64
	next           atomic.Uint64

	// expiry is closed and replaced at every tick of the drain loop, every
	// tickEvery: a publish awaiting its confirm gives up after expiryTicks
	// of them, at least confirmTimeout and at most two ticks more.
	expiry      atomic.Pointer[chan struct{}]
	tickEvery   time.Duration
	expiryTicks int

	stall stallWatch // stall.go
	log   *zap.Logger

	stop     chan struct{}
	wg       sync.WaitGroup
	retiring sync.WaitGroup // closes of retired channels, ended by the connection's close
	retireMu sync.Mutex
	finished bool // waitRetired has begun: close retired channels in place
}

func newPublisher(conn *amqpconn.Conn, cfg config) *publisher {
	p := &publisher{
		conn:           conn,
		window:         make(chan struct{}, cfg.inFlight),
		confirmTimeout: cfg.confirmTimeout,
		slots:          make([]*slot, cfg.channels),
		stall:          stallWatch{after: cfg.stallAfter},
		log:            cfg.logger.With(zap.String("connection", cfg.name+" publish")),
		stop:           make(chan struct{}),
	}
	for i := range p.slots {
		p.slots[i] = newSlot()
	}
	p.tickEvery, p.expiryTicks = expiryClock(cfg.confirmTimeout)
	expiry := make(chan struct{})
	p.expiry.Store(&expiry)
	p.wg.Add(1)
	go p.drainLoop()
	return p
}

// tickStall re-decides the stall (stall.go) on the current connection;
// a publisher made without one or a logger (a test's) has generation 0
// and logs nothing.
func (p *publisher) tickStall() {
	var gen uint64
	if p.conn != nil {
		gen = p.conn.Generation()
	}
	log := p.log
	if log == nil {
		log = zap.NewNop()
	}
	p.stall.tick(time.Now(), gen, log)
}

// close stops the drain loop; the connection's close resolves whatever is
// still in flight as unconfirmed.
func (p *publisher) close() {
	close(p.stop)
	p.wg.Wait()
}

func (p *publisher) drainLoop() {
	defer p.wg.Done()
	t := time.NewTicker(p.tickEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			for _, s := range p.slots {
				if c := s.cur.Load(); c != nil {
					c.drain()
				}
			}
			next := make(chan struct{})
			close(*p.expiry.Swap(&next))
			p.tickStall()
		}
	}
}

// expiryClock is the drain loop's tick for a confirm timeout, an eighth of
// it between 10 ms and drainEvery, and the ticks a publish waits: one more
// than fit in the timeout, since its wait begins between two ticks, so it
// never gives up early. A loaded machine's late ticks only make it later.
func expiryClock(timeout time.Duration) (every time.Duration, ticks int) {
	every = min(max(timeout/8, 10*time.Millisecond), drainEvery)
	return every, int((timeout+every-1)/every) + 1
}

func destination(p *transport.Publishing) string {
	if p.Exchange == "" {
		return fmt.Sprintf("queue %q", p.RoutingKey)
	}
	return fmt.Sprintf("exchange %q (key %q)", p.Exchange, p.RoutingKey)
}

func (p *publisher) publish(ctx context.Context, pub *transport.Publishing) (transport.Confirmation, error) {
	if reason, blocked := p.conn.Blocked(); blocked {
		return transport.Confirmation{}, fmt.Errorf(
			"acemq: publish to %s: %w (%s): the broker refuses publishes until the alarm clears",
			destination(pub), transport.ErrBlocked, reason)
	}
	headers, own, err := sendTable(pub.Headers)
	if err != nil {
		return transport.Confirmation{}, fmt.Errorf("acemq: publish to %s: header %w", destination(pub), err)
	}
	size, err := measure(pub, headers)
	if err != nil {
		return transport.Confirmation{}, err
	}
	// Only a mandatory publish can come back as a basic.return, and it is
	// matched to its publish by its id when it has one, or by seqHeader.
	// A seqHeader of the caller's is replaced, so never matched by id.
	var id string
	if pub.Mandatory {
		if _, theirs := headers[seqHeader]; !theirs {
			id, _ = headers[idHeader].(string)
		}
	}

	probe, err := p.stall.admit(time.Now())
	if err != nil {
		return transport.Confirmation{}, fmt.Errorf("acemq: publish to %s: not sent: %w", destination(pub), err)
	}
	if probe {
		defer p.stall.probed()
	}
	select {
	case p.window <- struct{}{}:
	case <-ctx.Done():
		return transport.Confirmation{}, unconfirmed(pub, fmt.Errorf("not sent: %w", ctx.Err()))
	case <-p.stop:
		return transport.Confirmation{}, transport.ErrClosed
	}
	defer func() { <-p.window }()
	p.stall.begin(time.Now()) // stall.go: from here on it waits for the broker
	defer p.stall.end()

	s := p.slots[p.next.Add(1)%uint64(len(p.slots))]
	for attempt := 1; ; attempt++ {
		c, err := s.get(ctx, p.conn, cap(p.window))
		if err != nil {
			if errors.Is(err, amqpconn.ErrClosed) {
				return transport.Confirmation{}, transport.ErrClosed
			}
			if isCtxErr(err) {
				return transport.Confirmation{}, unconfirmed(pub, fmt.Errorf("not sent: %w", err))
			}
			return transport.Confirmation{}, fmt.Errorf("acemq: publish to %s: open channel: %w", destination(pub), classify(err))
		}
		if err := fit(pub, size, c); err != nil {
			return transport.Confirmation{}, err
		}
		t := c.register(pub.Mandatory, id, &p.seq)
		switch {
		case t.seq != 0:
			if !own {
				headers, own = maps.Clone(headers), true
				if headers == nil {
					headers = make(amqp.Table, 1)
				}
			}
			headers[seqHeader] = int64(t.seq)
		case own:
			delete(headers, seqHeader) // one an earlier attempt added
		}
		c.begin()
		dc, err := c.ch.PublishWithDeferredConfirmWithContext(ctx, pub.Exchange, pub.RoutingKey, pub.Mandatory, false, toPublishing(pub, headers))
		if err != nil {
			if c.forget(t, false) {
				s.retire(c, p.closeRetired)
			}
			c.end(p.closeRetired)
			if c.ch.IsClosed() && attempt < maxSendAttempts {
				continue
			}
			if isCtxErr(err) {
				return transport.Confirmation{}, unconfirmed(pub, fmt.Errorf("not sent: %w", err))
			}
			return transport.Confirmation{}, unconfirmed(pub, classify(err))
		}
		conf, retire, err := p.await(ctx, c, t, dc, pub)
		if retire {
			s.retire(c, p.closeRetired)
		}
		c.end(p.closeRetired)
		return conf, err
	}
}

// closeRetired closes a retired channel off the publishing goroutine: a
// channel close waits for the broker, which may not answer while it
// blocks the connection. Closing the connection ends the wait.
func (p *publisher) closeRetired(c *confirmCh) {
	p.retireMu.Lock()
	if p.finished { // the connection is closed or closing: no wait
		p.retireMu.Unlock()
		closeChannel(c.ch)
		return
	}
	p.retiring.Add(1)
	p.retireMu.Unlock()
	go func() {
		defer p.retiring.Done()
		closeChannel(c.ch)
	}()
}

// waitRetired returns once the closes of retired channels have ended. Call
// it after closing the connection, which ends them.
func (p *publisher) waitRetired() {
	p.retireMu.Lock()
	p.finished = true
	p.retireMu.Unlock()
	p.retiring.Wait()
}

// await waits for the confirm of one publish; retire says its channel
// should take no more (it nacked, or holds too many forgotten ids). The
// confirm timeout is counted in ticks of the drain loop (expiry), not on a
// timer of its own: a timer per publish was an eighth of the transport's
// allocations.
func (p *publisher) await(ctx context.Context, c *confirmCh, t ticket, dc *amqp.DeferredConfirmation, pub *transport.Publishing) (conf transport.Confirmation, retire bool, err error) {
	for ticks := 0; ; {
		expiry := p.expiry.Load()
		select {
		case <-dc.Done():
			if dc.Acked() || !c.ch.IsClosed() {
				p.stall.answer(time.Now()) // stall.go
			}
			if dc.Acked() {
				return transport.Confirmation{Routed: !c.settle(t)}, false, nil
			}
			c.forget(t, true)
			// A closed channel resolves every pending confirmation as not
			// acked: only a channel still open has truly nacked.
			if c.ch.IsClosed() {
				return transport.Confirmation{}, false, p.closedBeforeConfirm(c, pub)
			}
			return transport.Confirmation{}, true, fmt.Errorf("acemq: publish to %s: %w", destination(pub), transport.ErrNacked)
		case <-ctx.Done():
			return transport.Confirmation{}, c.forget(t, false), unconfirmed(pub, ctx.Err())
		case <-*expiry:
			if ticks++; ticks < p.expiryTicks {
				continue
			}
			return transport.Confirmation{}, c.forget(t, false),
				unconfirmed(pub, fmt.Errorf("no confirm within %s", p.confirmTimeout))
		}
	}
}

// closedBeforeConfirm explains a publish whose channel closed before its
// confirm came. The outcome is unknown (other messages in flight on the
// channel may have been stored) except when the broker closed the channel
// because of this message's exchange: it does not exist (404), or the user
// may not write to it (403 "write access to exchange 'amq.default' in
// vhost 'v' refused for user 'u'", the permissions withdrawn). Then it was
// refused.
func (p *publisher) closedBeforeConfirm(c *confirmCh, pub *transport.Publishing) error {
	reason := c.closeReason()
	if reason == nil {
		return unconfirmed(pub, errChannelClosed)
	}
	if reason.Code == codeNotFound && pub.Exchange != "" &&
		strings.Contains(reason.Reason, "exchange '"+pub.Exchange+"'") {
		return fmt.Errorf("acemq: publish to %s: %w", destination(pub), classify(reason))
	}
	if reason.Code == codeAccessRefused && strings.Contains(reason.Reason, "exchange '"+exchangeName(pub.Exchange)+"'") {
		return fmt.Errorf("acemq: publish to %s: %w", destination(pub), classify(reason))
	}
	return unconfirmed(pub, fmt.Errorf("%w: %s (%d)", errChannelClosed, reason.Reason, reason.Code))
}

// exchangeName is how the broker names exchange in its replies: the
// default exchange as amq.default.
func exchangeName(exchange string) string {
	if exchange == "" {
		return "amq.default"
	}
	return exchange
}

func toPublishing(p *transport.Publishing, headers amqp.Table) amqp.Publishing {
	return amqp.Publishing{
		Headers:         headers,
		ContentType:     p.ContentType,
		ContentEncoding: p.ContentEncoding,
		DeliveryMode:    p.DeliveryMode,
		Priority:        p.Priority,
		CorrelationId:   p.CorrelationID,
		ReplyTo:         p.ReplyTo,
		Expiration:      p.Expiration,
		MessageId:       p.MessageID,
		Timestamp:       p.Timestamp,
		Type:            p.Type,
		UserId:          p.UserID,
		AppId:           p.AppID,
		Body:            p.Body,
	}
}
