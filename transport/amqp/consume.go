package rabbitmq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
)

// consumerSeq numbers the consumer tags the transport chooses.
var consumerSeq atomic.Uint64

// Consume subscribes to queue on a channel of its own (basic.qos with
// opts.Prefetch, then basic.consume without auto-ack). The subscription
// survives reconnects: its Deliveries channel carries on with deliveries
// from a new channel, and those received before the reconnect become stale.
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
		queue:    queue,
		tag:      tag,
		prefetch: prefetch,
		out:      make(chan transport.Delivery, prefetch),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.ctx, s.cancelFn = context.WithCancel(context.Background())
	ch, ledger, deliveries, err := s.open(ctx)
	if err != nil {
		s.cancelFn()
		return nil, fmt.Errorf("acemq: consume queue %q: %w", queue, classify(err))
	}
	s.ch, s.ledger = ch, ledger
	if !t.track(s) {
		s.cancelFn()
		closeChannel(ch)
		return nil, transport.ErrClosed
	}
	go s.run(ch, ledger, deliveries)
	return s, nil
}

// subscription is one consumer, moved to a new channel after every
// reconnect until Cancel or Close.
type subscription struct {
	t        *Transport
	log      *zap.Logger
	queue    string
	tag      string
	prefetch int
	out      chan transport.Delivery

	stop     chan struct{}   // closed by halt: stop forwarding now
	ctx      context.Context // ends at halt, for waits on the broker
	cancelFn context.CancelFunc
	haltOnce sync.Once
	done     chan struct{} // closed when run has returned

	rpc       sync.Mutex // channel RPCs (cancel, close) must not overlap
	mu        sync.Mutex
	ch        *amqp.Channel // the current channel; nil never after Consume
	ledger    *ackLedger    // ch's acks
	cancelled bool
}

var _ transport.Subscription = (*subscription)(nil)

// Deliveries yields the queue's messages until Cancel has drained the
// consumer, Close, or the broker cancelled the consumer (queue deleted). It
// buffers up to the prefetch; deliveries buffered when their channel died
// are stale.
func (s *subscription) Deliveries() <-chan transport.Delivery { return s.out }

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
	ch := s.ch
	s.mu.Unlock()
	s.rpc.Lock()
	defer s.rpc.Unlock()
	if ch.IsClosed() {
		return nil // run sees the flag instead of resubscribing
	}
	if err := ch.Cancel(s.tag, false); err != nil && !ch.IsClosed() {
		return fmt.Errorf("acemq: cancel consumer %q on queue %q: %w", s.tag, s.queue, classify(err))
	}
	return nil
}

// Close stops the subscription and closes its channel after sending the
// acks still waiting to join a multiple-ack: the broker requeues every
// unsettled delivery, marked redelivered.
func (s *subscription) Close() error {
	s.halt()
	<-s.done
	s.rpc.Lock()
	defer s.rpc.Unlock()
	s.flushAcks()
	s.mu.Lock()
	ch := s.ch
	s.mu.Unlock()
	closeChannel(ch)
	return nil
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
func (s *subscription) open(ctx context.Context) (*amqp.Channel, *ackLedger, <-chan amqp.Delivery, error) {
	ch, err := s.t.consume.Channel(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := ch.Qos(s.prefetch, 0, false); err != nil {
		closeChannel(ch)
		return nil, nil, nil, err
	}
	d, err := ch.Consume(s.queue, s.tag, false, false, false, false, nil)
	if err != nil {
		closeChannel(ch)
		return nil, nil, nil, err
	}
	return ch, newAckLedger(ch, s.prefetch), d, nil
}

func (s *subscription) run(ch *amqp.Channel, ledger *ackLedger, deliveries <-chan amqp.Delivery) {
	defer s.t.wg.Done()
	defer s.t.untrack(s)
	defer close(s.done)
	defer s.closeOut()
	for {
		if !s.forward(ch, ledger, deliveries) {
			return
		}
		s.mu.Lock()
		cancelled := s.cancelled
		s.mu.Unlock()
		if cancelled {
			return // drained: the channel stays open for settling until Close
		}
		if !ch.IsClosed() {
			s.log.Warn("acemq: the broker cancelled the consumer (queue deleted?); the subscription ends")
			return
		}
		s.log.Warn("acemq: consumer channel lost; resubscribing, its unsettled deliveries are stale")
		ledger.close()
		if ch, ledger, deliveries = s.resubscribe(); ch == nil {
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
		for len(s.out) > 0 {
			select {
			case <-s.out:
			default:
			}
		}
	default:
	}
	close(s.out)
}

// forward hands deliveries on until the channel's deliveries close (true)
// or halt (false).
func (s *subscription) forward(ch *amqp.Channel, ledger *ackLedger, deliveries <-chan amqp.Delivery) bool {
	for {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return true
			}
			if ch.IsClosed() {
				continue // stale already: the broker redelivers it
			}
			select {
			case s.out <- toDelivery(ch, ledger, s.queue, &d):
			case <-s.stop:
				return false
			}
		case <-s.stop:
			return false
		}
	}
}

// resubscribe consumes again on a new channel, retrying with backoff; nil
// means the subscription was cancelled or halted meanwhile.
func (s *subscription) resubscribe() (*amqp.Channel, *ackLedger, <-chan amqp.Delivery) {
	ctx := s.ctx
	for attempt := 0; ; attempt++ {
		s.mu.Lock()
		cancelled := s.cancelled
		s.mu.Unlock()
		if cancelled {
			return nil, nil, nil
		}
		ch, ledger, deliveries, err := s.open(ctx)
		if err == nil {
			s.mu.Lock()
			s.ch, s.ledger = ch, ledger
			cancelled = s.cancelled
			s.mu.Unlock()
			if cancelled { // Cancel saw the old channel: cancel on this one
				s.rpc.Lock()
				_ = ch.Cancel(s.tag, false)
				s.rpc.Unlock()
			}
			return ch, ledger, deliveries
		}
		if ctx.Err() != nil {
			return nil, nil, nil
		}
		s.log.Warn("acemq: resubscribe failed", zap.Int("attempt", attempt+1), zap.Error(classify(err)))
		if s.t.cfg.backoff.Wait(ctx, nil, attempt) != nil { // ctx ends at halt, with s.stop
			return nil, nil, nil
		}
	}
}

// Err says why Deliveries closed unasked; see transport.Subscription.
func (s *subscription) Err() error { return nil }
