package rabbitmq

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
)

// topologies remembers what was declared, to declare it again after a
// reconnect.
type topologies struct {
	log *zap.Logger
	// mu serialises declarations with the replay, so that a topology
	// declared while a reconnect happens is either replayed or declared on
	// the new connection.
	mu   sync.Mutex
	done []transport.Topology
}

func (tp *topologies) declare(ctx context.Context, conn *amqpconn.Conn, top transport.Topology) error {
	for {
		// A reconnect the broker refuses (the vhost deleted, access
		// withdrawn) is the answer: waiting for it would only end in ctx's
		// deadline, which names nothing that happened.
		c, err := conn.ConnectionUnlessRefused(ctx)
		if err != nil {
			return fmt.Errorf("acemq: declare: %w", classify(err))
		}
		tp.mu.Lock()
		err = applyTopology(c, top)
		if err == nil {
			tp.remember(top)
		}
		tp.mu.Unlock()
		if err != nil && c.IsClosed() && ctx.Err() == nil {
			continue // the connection died under us: declare on the next one
		}
		return err
	}
}

// remember keeps top for replay unless an equal topology already is. An
// exclusive queue is not kept: it went with the connection that owned it,
// and its owner declares it again if it still wants it (one replayed after
// its owner deleted it would stand for something no longer true).
func (tp *topologies) remember(top transport.Topology) {
	if slices.ContainsFunc(top.Queues, func(q transport.Queue) bool { return q.Exclusive }) {
		top.Queues = slices.DeleteFunc(slices.Clone(top.Queues), func(q transport.Queue) bool { return q.Exclusive })
		if len(top.Exchanges)+len(top.Queues)+len(top.Bindings)+len(top.ExchangeBindings) == 0 {
			return
		}
	}
	for _, d := range tp.done {
		if reflect.DeepEqual(d, top) {
			return
		}
	}
	tp.done = append(tp.done, top)
}

// redeclare is the consume connection's OnConnect hook: it replays every
// topology in order. A refusal is logged and the replay goes on; it cannot
// be returned to anyone.
func (tp *topologies) redeclare(_ context.Context, c *amqp.Connection) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, top := range tp.done {
		if err := applyTopology(c, top); err != nil {
			tp.log.Error("acemq: re-declaring topology after reconnect failed", zap.Error(err))
		}
	}
}

// applyTopology declares top on a channel of its own, so that a refusal
// closes only that channel.
func applyTopology(c *amqp.Connection, top transport.Topology) error {
	ch, err := c.Channel()
	if err != nil {
		return fmt.Errorf("acemq: declare: open channel: %w", classify(err))
	}
	defer closeChannel(ch)
	for _, ex := range top.Exchanges {
		kind := ex.Kind
		if kind == "" {
			kind = amqp.ExchangeDirect
		}
		args, err := toTable(ex.Args)
		if err != nil {
			return fmt.Errorf("acemq: declare exchange %q: argument %w", ex.Name, err)
		}
		if err := ch.ExchangeDeclare(ex.Name, kind, ex.Durable, false, false, false, args); err != nil {
			return fmt.Errorf("acemq: declare exchange %q: %w", ex.Name, classify(err))
		}
	}
	for _, q := range top.Queues {
		args, err := toTable(q.Args)
		if err != nil {
			return fmt.Errorf("acemq: declare queue %q: argument %w", q.Name, err)
		}
		if _, err := ch.QueueDeclare(q.Name, q.Durable, false, q.Exclusive, false, args); err != nil {
			return fmt.Errorf("acemq: declare queue %q: %w", q.Name, classify(err))
		}
	}
	for _, b := range top.Bindings {
		if err := ch.QueueBind(b.Queue, b.Key, b.Exchange, false, nil); err != nil {
			return fmt.Errorf("acemq: bind queue %q to exchange %q (key %q): %w", b.Queue, b.Exchange, b.Key, classify(err))
		}
	}
	for _, b := range top.ExchangeBindings {
		if err := ch.ExchangeBind(b.Destination, b.Key, b.Source, false, nil); err != nil {
			return fmt.Errorf("acemq: bind exchange %q to exchange %q (key %q): %w", b.Destination, b.Source, b.Key, classify(err))
		}
	}
	return nil
}
