package delay

import (
	"context"
	"fmt"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// Redelivery is what one [Redeliver] pass did.
type Redelivery struct {
	// Arrived is how many messages reached their destination.
	Arrived int
	// Waiting counts, by destination queue, the messages whose destination
	// still does not exist: they wait in Undeliverable for the next pass.
	// A routing key that names no destination (a foreign client's) counts
	// under "".
	Waiting map[string]int
	// Skipped is how many messages were for a queue [Only] left out: put
	// back to wait, for whoever serves that queue.
	Skipped int
}

// RedeliverOption adjusts [Redeliver].
type RedeliverOption func(*redeliverConfig)

type redeliverConfig struct{ only map[string]bool }

// Only limits a Redeliver to messages for these queues; the others are put
// back to wait, untouched, for whoever serves their queue. A server passes
// its own queues: Redeliver publishes by the default exchange, which
// reaches any queue, so without this a client allowed to publish to the
// delay exchanges could have a server put a message into any queue of the
// vhost, not only those bound to the delay queues.
func Only(queues ...string) RedeliverOption {
	return func(c *redeliverConfig) {
		if c.only == nil {
			c.only = map[string]bool{}
		}
		for _, q := range queues {
			c.only[q] = true
		}
	}
}

// Redeliver sends every message waiting in the Undeliverable queue on to
// its destination, once each: straight to the queue its routing key names,
// by the default exchange, so that a queue that exists but was never bound
// ([Bind]) gets its messages too. One whose destination still does not
// exist goes back to wait in Undeliverable. A client does this, not the
// broker, because RabbitMQ drops a message dead-lettered round a loop of
// queues with no rejection in it, so a TTL loop would lose the second
// round; a server runs it every few seconds.
//
// Each is forwarded as it is, without the broker's own headers and
// properties (wire.Forward), and published (confirmed, mandatory) before
// the original is acked: at worst a crash between the two delivers a
// message twice, never zero times.
func Redeliver(ctx context.Context, t transport.Transport, opts ...RedeliverOption) (Redelivery, error) {
	var cfg redeliverConfig
	for _, o := range opts {
		o(&cfg)
	}
	r := Redelivery{Waiting: map[string]int{}}
	info, err := t.Inspect(ctx, Undeliverable)
	if err != nil {
		return r, fmt.Errorf("acemq: redeliver: %w", err)
	}
	for range info.Messages {
		d, ok, err := t.Get(ctx, Undeliverable)
		if err != nil || !ok {
			return r, err
		}
		to := Destination(d.RoutingKey)
		skip := cfg.only != nil && !cfg.only[to]
		if skip {
			to = "" // back to wait, untouched
		}
		arrived, err := forward(ctx, t, d, to)
		if err != nil {
			_ = d.Reject(true)
			return r, err
		}
		if err := d.Ack(); err != nil {
			return r, fmt.Errorf("acemq: redeliver: ack: %w", err)
		}
		switch {
		case arrived:
			r.Arrived++
		case skip:
			r.Skipped++
		default:
			r.Waiting[to]++
		}
	}
	return r, nil
}

// forward publishes d to queue to, or back to Undeliverable when no such
// queue exists.
func forward(ctx context.Context, t transport.Transport, d transport.Delivery, to string) (arrived bool, err error) {
	if to != "" {
		c, err := t.Publish(ctx, wire.Forward(d, "", to, 0))
		if err != nil {
			return false, fmt.Errorf("acemq: redeliver to %q: %w", to, err)
		}
		if c.Routed {
			return true, nil
		}
	}
	c, err := t.Publish(ctx, wire.Forward(d, Undeliverable, d.RoutingKey, 0))
	if err == nil && !c.Routed {
		err = fmt.Errorf("no queue took it (is %s bound to its exchange?)", Undeliverable)
	}
	if err != nil {
		return false, fmt.Errorf("acemq: redeliver: back to %s: %w", Undeliverable, err)
	}
	return false, nil
}

// Destination is the queue a delayed message's routing key names: what
// follows its 28 bit-words; "" for a key that is not one of the layout's.
func Destination(key string) string {
	rest := key
	for range Levels {
		if len(rest) < 2 || (rest[0] != '0' && rest[0] != '1') || rest[1] != '.' {
			return ""
		}
		rest = rest[2:]
	}
	if checkQueue(rest) != nil {
		return ""
	}
	return rest
}
