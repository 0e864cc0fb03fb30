package rabbitmq

import (
	"context"
	"errors"
	"fmt"
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

// Reject rejects this delivery; requeue false lets the queue's dead-letter
// exchange take it.
func (a *acker) Reject(requeue bool) error {
	if a.ledger != nil {
		return a.settle(func() error { return a.ledger.reject(a.tag, requeue) })
	}
	return a.settle(func() error { return a.ch.Reject(a.tag, requeue) })
}

func (a *acker) settle(send func() error) error {
	if !a.settled.CompareAndSwap(false, true) {
		return transport.ErrStaleDelivery
	}
	if a.ch.IsClosed() {
		return transport.ErrStaleDelivery
	}
	if err := send(); err != nil {
		if a.ch.IsClosed() || errors.Is(err, amqp.ErrClosed) || errors.Is(err, transport.ErrStaleDelivery) {
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
