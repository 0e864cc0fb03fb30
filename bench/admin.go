package main

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"sync"

	"github.com/acemq/acemq"
	amqp "github.com/rabbitmq/amqp091-go"
)

// admin is a plain amqp091-go connection that sets queues up, fills them
// and deletes them, outside the timed part of every run.
type admin struct {
	mu   sync.Mutex
	conn *amqp.Connection
}

func dialAdmin(url string) (*admin, error) {
	conn, err := amqp.DialConfig(url, amqp.Config{Properties: amqp.Table{"connection_name": "bench admin"}})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", redact(url), err)
	}
	return &admin{conn: conn}, nil
}

func (a *admin) close() { _ = a.conn.Close() }

// with runs fn on a fresh channel.
func (a *admin) with(fn func(ch *amqp.Channel) error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, err := a.conn.Channel()
	if err != nil {
		return err
	}
	defer func() {
		if !ch.IsClosed() {
			_ = ch.Close()
		}
	}()
	return fn(ch)
}

// declare declares a durable queue without arguments, as acemq's topology
// and watermill's durable queue config both do.
func (a *admin) declare(queue string) error {
	return a.with(func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(queue, true, false, false, false, nil)
		return err
	})
}

// count is the queue's ready messages.
func (a *admin) count(queue string) (int, error) {
	var n int
	err := a.with(func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		n = q.Messages
		return err
	})
	return n, err
}

// fill declares queue and puts n persistent messages in it with confirms,
// headers(i) giving the i-th message's headers.
func (a *admin) fill(ctx context.Context, queue string, n int, body []byte, headers func(i int) amqp.Table) error {
	if err := a.declare(queue); err != nil {
		return err
	}
	err := a.with(func(ch *amqp.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		const window = 1000
		pending := make([]*amqp.DeferredConfirmation, 0, window)
		flush := func() error {
			for _, dc := range pending {
				ok, err := dc.WaitContext(ctx)
				if err != nil {
					return err
				}
				if !ok {
					return errors.New("fill: nacked")
				}
			}
			pending = pending[:0]
			return nil
		}
		for i := range n {
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
				Headers:      headers(i),
				ContentType:  "application/json",
				DeliveryMode: amqp.Persistent,
				Body:         body,
			})
			if err != nil {
				return err
			}
			if pending = append(pending, dc); len(pending) == window {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	})
	if err != nil {
		return fmt.Errorf("fill %s: %w", queue, err)
	}
	if got, err := a.count(queue); err != nil || got != n {
		return fmt.Errorf("fill %s: %d messages in the queue, want %d (%v)", queue, got, n, err)
	}
	return nil
}

// deleteQueues deletes queue and whatever acemq declares beside it (its
// .dlq and .parked), and the extra queues named.
func (a *admin) deleteQueues(queue string, extra ...string) error {
	names := append([]string{queue, acemq.DeadLetterQueue(queue), acemq.ParkedQueue(queue)}, extra...)
	for _, name := range names {
		err := a.with(func(ch *amqp.Channel) error {
			_, err := ch.QueueDelete(name, false, false, false)
			return err
		})
		var ae *amqp.Error
		if err != nil && !(errors.As(err, &ae) && ae.Code == amqp.NotFound) {
			return fmt.Errorf("delete queue %s: %w", name, err)
		}
	}
	return nil
}

// redact hides the password of an AMQP URL.
func redact(url string) string {
	u, err := neturl.Parse(url)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
