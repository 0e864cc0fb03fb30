package rabbitmq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
)

// consumerSeq numbers the consumer tags the transport chooses.
var consumerSeq atomic.Uint64

// Consume subscribes to queue on a channel of its own (basic.qos with
// opts.Prefetch, then basic.consume without auto-ack), on a connection of
// its own unless WithConnectionPerConsumer(false). The subscription
// survives reconnects: its Deliveries channel carries on with deliveries
// from a new channel, and those received before the reconnect become
// stale.
//
// It ends on its own, closing Deliveries with Err set, only when consuming
// again cannot help: the broker cancelled the consumer (the queue was
// deleted: transport.ErrCancelled), consuming again found the queue gone
// (transport.ErrNotFound) or was refused (transport.ErrAccessRefused), or
// the broker refused to reconnect for good (530 "vhost ... not found":
// the vhost deleted; 530 "access to vhost ... refused for user ...", or
// 403: access withdrawn). After a consumer_timeout, a connection closed
// by an operator or a node going down, or a delivery amqp091-go cannot
// read, it consumes again; every such loss is logged at warn with the
// broker's code and text.
//
// A reconnect the broker refuses for now never ends it: 530 "connection
// limit (N) is reached" (the vhost's or the user's max-connections, a
// node's connection_max), 541 "vhost ... is down", a node that does not
// accept connections (booting, in maintenance). The connection is dialled
// again with backoff (the transport's WithBackoff), opts.OnRefused is told
// of each refusal and of the reconnect that ends them, Deliveries stays
// open and Err nil. A Consume whose own first dial is so refused fails
// with a transport.RefusedError (transport.ErrRefused), for the caller to
// try again.
func (t *Transport) Consume(ctx context.Context, queue string, opts transport.ConsumeOptions) (transport.Subscription, error) {
	if t.isClosed() {
		return nil, transport.ErrClosed
	}
	prefetch := opts.Prefetch
	if prefetch <= 0 {
		prefetch = 1
	}
	tag := opts.Tag
	if tag == "" {
		tag = fmt.Sprintf("acemq-%s-%d", queue, consumerSeq.Add(1))
	}
	s := &subscription{
		t:        t,
		log:      t.log.With(zap.String("queue", queue), zap.String("consumer", tag)),
		conn:     t.consume,
		queue:    queue,
		tag:      tag,
		prefetch: prefetch,
		single:   opts.SingleActive,
		timedOut: opts.OnConsumerTimeout,
		out:      make(chan transport.Delivery, prefetch),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		over:     make(chan struct{}),
	}
	if t.cfg.connPerConsumer {
		conn, err := t.openConsumeConn(ctx, queue)
		if err != nil {
			return nil, fmt.Errorf("acemq: consume queue %q: %w", queue, t.dialRefusal(err)) // refusal.go
		}
		s.conn, s.own = conn, true
	}
	s.watchRefusals(opts.OnRefused)
	s.ctx, s.cancelFn = context.WithCancel(context.Background())
	c, err := s.open(ctx)
	if err != nil {
		s.cancelFn()
		s.stopWatching()
		s.closeConn()
		return nil, fmt.Errorf("acemq: consume queue %q: %w", queue, classify(err))
	}
	s.ch, s.ledger = c.ch, c.ledger
	if !t.track(s) {
		s.cancelFn()
		s.stopWatching()
		closeChannel(c.ch)
		s.closeConn()
		return nil, transport.ErrClosed
	}
	go s.run(c)
	return s, nil
}

// subscription is one consumer, moved to a new channel after every
// reconnect until Cancel or Close, or until the broker makes consuming
// again pointless (see decideClose).
type subscription struct {
	t        *Transport
	log      *zap.Logger
	conn     *amqpconn.Conn // its own, or the transport's consume connection
	own      bool           // conn is the subscription's, to close with it
	queue    string
	tag      string
	prefetch int
	single   bool                // ConsumeOptions.SingleActive: no probation
	timedOut func(time.Duration) // ConsumeOptions.OnConsumerTimeout; nil for none
	out      chan transport.Delivery

	stop     chan struct{}   // closed by halt: stop forwarding now
	ctx      context.Context // ends at halt, for waits on the broker
	cancelFn context.CancelFunc
	haltOnce sync.Once
	done     chan struct{} // closed when run has returned
	over     chan struct{} // closed with out (closeOut)

	rpc       sync.Mutex // channel RPCs (cancel, close) must not overlap
	mu        sync.Mutex
	ch        *amqp.Channel // the current channel; nil never after Consume
	ledger    *ackLedger    // ch's acks
	restTag   string        // the second consumer's tag on ch once its probation ended, "" before (probation.go)
	cancelled bool          // Cancel or Close asked: nothing is an error
	err       error         // why it ended unasked; see Err
	unwatch   func()        // ends watchRefusals; nil when none
}

var _ transport.Subscription = (*subscription)(nil)

// consumeCh is one channel consuming the queue, with what tells how its
// deliveries ended.
type consumeCh struct {
	ch         *amqp.Channel
	ledger     *ackLedger
	deliveries <-chan amqp.Delivery
	// The probation (probation.go): the consumer above runs at prefetch
	// 1 until a delivery comes that is not redelivered; then rest, the
	// second consumer, takes the rest of the prefetch, and forward hands
	// the deliveries of both on in delivery-tag order.
	probation  bool
	rest       <-chan amqp.Delivery // nil until the probation ended, and once closed
	restTag    string
	next       uint64                   // the delivery tag forward hands on next; 0 before the first
	pending    map[uint64]amqp.Delivery // received ahead of next
	rawCancels <-chan string            // the broker's basic.cancel, of either consumer; forward passes it on
	passCancel chan<- string            // to cancels
	closes     <-chan *amqp.Error       // the channel's (or its connection's) close
	cancels    <-chan string            // basic.cancel from the broker
}

// Deliveries yields the queue's messages until Cancel has drained the
// consumer, Close, or the subscription ended on its own (Err). It buffers
// up to the prefetch; deliveries buffered when their channel died are
// dropped (they are stale, and the broker redelivers them).
func (s *subscription) Deliveries() <-chan transport.Delivery { return s.out }

// Err says why Deliveries closed unasked (see transport.Subscription and
// Consume): nil while the subscription runs, and when Cancel or Close came
// first. Once set it stays set.
func (s *subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Cancel sends basic.cancel and returns once the broker has confirmed it.
// Deliveries keeps yielding what the broker had already sent, then closes;
// those deliveries stay settleable on their channel until Close.
func (s *subscription) Cancel(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("acemq: cancel consumer %q: %w", s.tag, err)
	}
	s.mu.Lock()
	if s.cancelled {
		s.mu.Unlock()
		return nil
	}
	s.cancelled = true
	s.mu.Unlock()
	s.rpc.Lock()
	defer s.rpc.Unlock()
	s.mu.Lock()
	ch, rest := s.ch, s.restTag // the probation's end adds rest, holding rpc
	s.mu.Unlock()
	if ch.IsClosed() {
		return nil // run sees the flag instead of resubscribing
	}
	for _, tag := range []string{s.tag, rest} {
		if tag == "" {
			continue
		}
		if err := ch.Cancel(tag, false); err != nil && !ch.IsClosed() {
			return fmt.Errorf("acemq: cancel consumer %q on queue %q: %w", tag, s.queue, classify(err))
		}
	}
	return nil
}

// Close stops the subscription and closes its channel (and its connection,
// when it has one of its own) after sending the acks still waiting to join
// a multiple-ack: the broker requeues every unsettled delivery, marked
// redelivered.
func (s *subscription) Close() error {
	s.mu.Lock()
	s.cancelled = true
	s.mu.Unlock()
	s.halt()
	<-s.done
	s.stopWatching()
	s.release(false)
	s.t.untrack(s)
	return nil
}

// release sends the acks waiting on the current channel, then closes the
// subscription's own connection, or else its channel (unless the
// transport is about to close the shared connection, withShared). It is
// idempotent.
func (s *subscription) release(withShared bool) {
	s.rpc.Lock()
	defer s.rpc.Unlock()
	s.flushAcks()
	switch {
	case s.own:
		s.closeConn()
	case !withShared:
		s.mu.Lock()
		ch := s.ch
		s.mu.Unlock()
		closeChannel(ch)
	}
}

// closeConn closes the subscription's own connection, if it has one.
func (s *subscription) closeConn() {
	if s.own {
		if err := s.conn.Close(); err != nil {
			s.log.Warn("acemq: closing the consumer's connection", zap.Error(err))
		}
	}
}

// flushAcks sends the acks waiting on the current channel and stops its
// ledger.
func (s *subscription) flushAcks() {
	s.mu.Lock()
	ledger := s.ledger
	s.mu.Unlock()
	ledger.flush()
}

// halt stops forwarding and any resubscribe in progress.
func (s *subscription) halt() {
	s.haltOnce.Do(func() {
		close(s.stop)
		s.cancelFn()
	})
}

// open makes a channel consuming the queue, with the ledger of its acks.
// With a prefetch over 1 it consumes on probation (probation.go): at
// prefetch 1 until forward sees a delivery that is not redelivered;
// unless the queue is single-active-consumer, where the probation's
// second consumer would never be active.
func (s *subscription) open(ctx context.Context) (*consumeCh, error) {
	ch, err := s.conn.ChannelUnlessRefused(ctx)
	if err != nil {
		return nil, err
	}
	c := &consumeCh{
		ch:         ch,
		probation:  s.prefetch > 1 && !s.single,
		closes:     ch.NotifyClose(make(chan *amqp.Error, 1)),
		rawCancels: ch.NotifyCancel(make(chan string, 2)), // one per consumer: amqp091-go blocks on a full one
	}
	cancels := make(chan string, 1)
	c.cancels, c.passCancel = cancels, cancels
	prefetch := s.prefetch
	if c.probation {
		prefetch = 1
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		closeChannel(ch)
		return nil, err
	}
	if c.deliveries, err = ch.Consume(s.queue, s.tag, false, false, false, false, nil); err != nil {
		closeChannel(ch)
		return nil, err
	}
	c.ledger = newAckLedger(ch, prefetch)
	return c, nil
}

func (s *subscription) run(c *consumeCh) {
	defer s.t.wg.Done()
	defer close(s.done)
	defer s.closeOut()
	for {
		if !s.forward(c) {
			return
		}
		if s.asked() {
			return // drained: the channel stays open for settling until Close
		}
		end := s.ended(c)
		if end.final {
			s.end(end)
			return
		}
		c.ledger.close()
		s.dropBuffered()
		if c = s.resubscribe(); c == nil {
			return
		}
	}
}

// closeOut closes Deliveries. After Close (not after Cancel) the
// deliveries still buffered are dropped first: their channel is closing and
// the broker requeues them.
func (s *subscription) closeOut() {
	select {
	case <-s.stop:
		s.dropBuffered()
	default:
	}
	close(s.out)
	close(s.over)
}

// Ended is closed once Deliveries is (transport.Ended).
func (s *subscription) Ended() <-chan struct{} { return s.over }

var _ transport.Ended = (*subscription)(nil)

// dropBuffered drops the deliveries waiting in Deliveries: their channel is
// gone, so they are stale and the broker redelivers them.
func (s *subscription) dropBuffered() {
	for len(s.out) > 0 {
		select {
		case <-s.out:
		default:
		}
	}
}

// forward hands deliveries on until the channel's deliveries close (true)
// or halt (false); after its probation, those of both its consumers, in
// the order the broker sent them.
func (s *subscription) forward(c *consumeCh) bool {
	for c.deliveries != nil || c.rest != nil {
		var d amqp.Delivery
		var ok bool
		select {
		case d, ok = <-c.deliveries:
			if !ok {
				c.deliveries = nil
				continue
			}
		case d, ok = <-c.rest:
			if !ok {
				c.rest = nil
				continue
			}
		case <-s.stop:
			return false
		}
		if c.ch.IsClosed() {
			continue // stale already: the broker redelivers it
		}
		if !s.hand(c, d) {
			return false
		}
		if c.probation && !d.Redelivered {
			s.endProbation(c)
		}
	}
	if !s.handPending(c) {
		return false
	}
	c.passCancels(s.tag)
	return true
}

// resubscribe consumes again on a new channel, retrying with backoff; nil
// means the subscription was cancelled or halted meanwhile, or ended
// because the broker refused it for good (decideClose).
func (s *subscription) resubscribe() *consumeCh {
	ctx := s.ctx
	for attempt := 0; ; attempt++ {
		if s.asked() {
			return nil
		}
		c, err := s.open(ctx)
		if err == nil {
			s.mu.Lock()
			s.ch, s.ledger, s.restTag = c.ch, c.ledger, ""
			cancelled := s.cancelled
			s.mu.Unlock()
			if cancelled { // Cancel saw the old channel: cancel on this one
				s.rpc.Lock()
				_ = c.ch.Cancel(s.tag, false)
				s.rpc.Unlock()
			}
			return c
		}
		if ctx.Err() != nil {
			return nil
		}
		if end := decideClose(s.queue, err); end.final {
			s.end(end)
			return nil
		}
		s.log.Warn("acemq: resubscribe failed", zap.Int("attempt", attempt+1), zap.Error(classify(err)))
		if s.t.cfg.backoff.Wait(ctx, nil, attempt) != nil { // ctx ends at halt, with s.stop
			return nil
		}
	}
}
