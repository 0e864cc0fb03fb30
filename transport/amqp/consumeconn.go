package rabbitmq

import (
	"context"
	"fmt"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// openConsumeConn dials the connection of one subscription (see
// WithConnectionPerConsumer), named after its queue in the broker's
// connection list.
//
// After a reconnect it hands the connection out only once the transport's
// consume connection is up too: that one declares the topology again when
// it reconnects, and a subscription that consumed before it did would find
// a queue lost with a broker restart missing (404) and end. When only the
// subscription's connection died (a delivery it cannot read) the wait is
// nothing.
func (t *Transport) openConsumeConn(ctx context.Context, queue string) (*amqpconn.Conn, error) {
	cfg := t.connCfg
	cfg.Name = t.cfg.name + " consume " + queue
	cfg.OnConnect = func(ctx context.Context, _ *amqp.Connection) {
		_, _ = t.consume.Connection(ctx) // ends at either connection's Close
	}
	conn, err := amqpconn.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conn, nil
}

// countUnreadable counts a connection of queue's consumer lost to a
// delivery amqp091-go cannot read, and returns the count.
func (t *Transport) countUnreadable(queue string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unreadable == nil {
		t.unreadable = make(map[string]int)
	}
	t.unreadable[queue]++
	return t.unreadable[queue]
}

// Unreadable returns how many times the consumer of queue lost its
// connection to a delivery amqp091-go cannot read (frame error 501 with
// 502 inside: headers nested deeper than 32 levels or holding over 8192
// entries, which RabbitMQ accepts) since Dial. Such a delivery stays at
// the head of its queue and comes back after every reconnect, so a count
// that grows names a queue an operator must clear by other means (the log
// says how). With WithConnectionPerConsumer(false) the connection is
// shared, and every queue consumed on it counts the loss.
func (t *Transport) Unreadable(queue string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unreadable[queue]
}

// DeleteQueue deletes queue (queue.delete, neither if-unused nor
// if-empty) on a throwaway channel: its messages are gone and the broker
// cancels its consumers, whose subscriptions end with
// transport.ErrCancelled. Deleting a queue that does not exist is no
// error, as on RabbitMQ. A topology declared through this transport that
// holds the queue declares it again after the next reconnect.
func (t *Transport) DeleteQueue(ctx context.Context, queue string) error {
	if t.isClosed() {
		return transport.ErrClosed
	}
	ch, err := t.consume.Channel(ctx)
	if err != nil {
		return fmt.Errorf("acemq: delete queue %q: %w", queue, classify(err))
	}
	defer closeChannel(ch)
	if _, err := ch.QueueDelete(queue, false, false, false); err != nil {
		return fmt.Errorf("acemq: delete queue %q: %w", queue, classify(err))
	}
	return nil
}
