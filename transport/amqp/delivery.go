package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// acker settles one delivery on the channel it arrived on, once. Delivery
// tags belong to their channel: once that channel is gone (a reconnect, a
// Close) the delivery is stale and nothing is sent, least of all on the
// channel that replaced it. The broker redelivers it.
//
// Deliveries of a subscription settle through their channel's ackLedger,
// which folds acks into multiple-acks; those of a basic.get settle alone.
type acker struct {
	ch      *amqp.Channel
	ledger  *ackLedger // nil: send each settlement at once
	tag     uint64
	settled atomic.Bool
}

var _ transport.Acknowledger = (*acker)(nil)

// Ack acknowledges this delivery, possibly in one multiple-ack with others
// (never with one that was not settled).
func (a *acker) Ack() error {
	if a.ledger != nil {
		return a.settle(func() error { return a.ledger.ack(a.tag) })
	}
	return a.settle(func() error { return a.ch.Ack(a.tag, false) })
}

// Reject with requeue gives this delivery back (basic.nack, requeue set:
// see giveBack for why not basic.reject); without requeue it rejects it
// (basic.reject), for the queue's dead-letter exchange to take.
func (a *acker) Reject(requeue bool) error {
	if a.ledger != nil {
		return a.settle(func() error { return a.ledger.reject(a.tag, requeue) })
	}
	if requeue {
		return a.settle(func() error { return giveBack(a.ch, a.tag) })
	}
	return a.settle(func() error { return a.ch.Reject(a.tag, false) })
}

// giveBack returns the delivery tag to its queue, unhandled, with
// basic.nack (requeue, not multiple) and never basic.reject. A give-back
// says "not now" (a shutdown, a replay skipping a message, a peek, an
// unknown outcome), not "this message failed", and on a quorum queue with
// a delivery limit the two may cost differently:
//
//   - RabbitMQ 3.10.8 (measured: TestGiveBackDeliveryBudget) and 3.13 (its
//     source): every return counts, basic.reject, basic.nack and a closed
//     channel alike, x-delivery-count +1 each.
//   - 4.0 to 4.2 (their source): the limit counts acquisitions, which
//     every return adds to, the same three alike; x-delivery-count shows
//     that count.
//   - 4.3 and later (their documentation, "Negative Acknowledgements", and
//     source): basic.reject with requeue counts as a failed delivery,
//     basic.nack with requeue does not (only x-acquired-count grows); a
//     closed channel or connection still counts, a consumer timeout does
//     not.
//
// So nack never spends more of the budget than reject, and from 4.3 it
// spends none.
func giveBack(ch interface {
	Nack(tag uint64, multiple, requeue bool) error
}, tag uint64) error {
	return ch.Nack(tag, false, true)
}

func (a *acker) settle(send func() error) error {
	if !a.settled.CompareAndSwap(false, true) {
		return transport.ErrStaleDelivery
	}
	if a.ch.IsClosed() {
		return transport.ErrStaleDelivery
	}
	if err := send(); err != nil {
		// A write the socket refused (reset, broken pipe) is a connection
		// going: the client closes it, and the broker requeues what the
		// channel held, this delivery among it, as when it is closed.
		var op *net.OpError
		if a.ch.IsClosed() || errors.Is(err, amqp.ErrClosed) || errors.Is(err, transport.ErrStaleDelivery) || errors.As(err, &op) {
			return transport.ErrStaleDelivery
		}
		return fmt.Errorf("acemq: settle delivery: %w", classify(err))
	}
	return nil
}

// toDelivery converts a delivery received on ch from queue; ledger is the
// channel's when it is a consumer's, nil for a basic.get.
func toDelivery(ch *amqp.Channel, ledger *ackLedger, queue string, d *amqp.Delivery) transport.Delivery {
	return transport.Delivery{
		Queue:       queue,
		Exchange:    d.Exchange,
		RoutingKey:  d.RoutingKey,
		Redelivered: d.Redelivered,
		Headers:     fromTable(d.Headers),
		Properties: transport.Properties{
			ContentType:     d.ContentType,
			ContentEncoding: d.ContentEncoding,
			DeliveryMode:    d.DeliveryMode,
			Priority:        d.Priority,
			CorrelationID:   d.CorrelationId,
			ReplyTo:         d.ReplyTo,
			Expiration:      d.Expiration,
			MessageID:       d.MessageId,
			Timestamp:       d.Timestamp.UTC(),
			Type:            d.Type,
			UserID:          d.UserId,
			AppID:           d.AppId,
		},
		Body:         d.Body,
		Acknowledger: &acker{ch: ch, ledger: ledger, tag: d.DeliveryTag},
	}
}

// getter runs basic.get on long-lived channels of the consume connection,
// one per queue, reopened when they die. One per queue because a Get on a
// missing queue closes its channel (404), and with it every delivery taken
// on that channel and not yet settled: a replay holding skipped messages of
// one queue must not lose them to a mistyped name of another. Channel RPCs
// must not overlap, so Gets take turns.
type getter struct {
	conn *amqpconn.Conn
	lock chan struct{} // a mutex that honours ctx
	chs  map[string]*amqp.Channel
}

func newGetter(conn *amqpconn.Conn) *getter {
	return &getter{conn: conn, lock: make(chan struct{}, 1), chs: make(map[string]*amqp.Channel)}
}

func (g *getter) get(ctx context.Context, queue string) (transport.Delivery, bool, error) {
	select {
	case g.lock <- struct{}{}:
	case <-ctx.Done():
		return transport.Delivery{}, false, fmt.Errorf("acemq: get from queue %q: %w", queue, ctx.Err())
	}
	defer func() { <-g.lock }()
	for attempt := 1; ; attempt++ {
		ch := g.chs[queue]
		if ch == nil || ch.IsClosed() {
			var err error
			if ch, err = g.conn.Channel(ctx); err != nil {
				return transport.Delivery{}, false, fmt.Errorf("acemq: get from queue %q: %w", queue, classify(err))
			}
			g.chs[queue] = ch
		}
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			if errors.Is(err, amqp.ErrClosed) && attempt < maxSendAttempts && ctx.Err() == nil {
				continue // the channel was already dead: open a new one
			}
			return transport.Delivery{}, false, fmt.Errorf("acemq: get from queue %q: %w", queue, classify(err))
		}
		if !ok {
			return transport.Delivery{}, false, nil
		}
		return toDelivery(ch, nil, queue, &d), true, nil
	}
}
