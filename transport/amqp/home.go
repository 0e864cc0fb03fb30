package rabbitmq

import (
	"context"
	"slices"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
	"go.uber.org/zap"
)

// declareAtHome declares each queue of top that has a home node
// (transport.Queue.Home) through that node, on a connection of its own to
// that node's URL alone (counted in the URLs' sorted order, so that a
// fleet of servers each given the cluster's URLs in another order, to
// connect to another node first, agree on every partition's node), closed once it is done, so that RabbitMQ's
// default leader locator, client-local, puts a new queue's leader there.
// It returns the rest of top, for the transport's own connection: the
// exchanges, the queues without a home, the bindings (declared after, so
// that the queues they bind exist). Each queue so declared is remembered
// as any topology is, and declared again after a reconnect through
// whichever node the transport then reaches: a queue that exists stays
// where it is.
//
// A home node that does not answer is no reason to fail: its queue is
// declared through the transport's own connection, with a warning that
// its leader may share a node with another partition's.
func (t *Transport) declareAtHome(ctx context.Context, top transport.Topology) (transport.Topology, error) {
	if !slices.ContainsFunc(top.Queues, func(q transport.Queue) bool { return q.Home > 0 }) {
		return top, nil
	}
	rest := top
	rest.Queues = nil
	homes := slices.Sorted(slices.Values(t.cfg.urls)) // the same nodes in whatever order each server was given them
	n := len(homes)
	for _, q := range top.Queues {
		if q.Home <= 0 {
			rest.Queues = append(rest.Queues, q)
			continue
		}
		node := (q.Home - 1) % n
		cfg := t.connCfg
		cfg.URLs = []string{homes[node]}
		cfg.Name = t.cfg.name + " declare"
		conn, err := amqpconn.Open(ctx, cfg)
		if err != nil {
			if ctx.Err() != nil {
				return top, ctx.Err()
			}
			t.log.Warn("acemq: the node a queue should be led by did not answer; declaring it through another node, so its leader may share a node with another partition's",
				zap.String("queue", q.Name), zap.Int("node", node+1), zap.Int("nodes", n), zap.Error(err))
			rest.Queues = append(rest.Queues, q)
			continue
		}
		err = t.topo.declare(ctx, conn, transport.Topology{Queues: []transport.Queue{q}})
		_ = conn.Close()
		if err != nil {
			return top, err
		}
	}
	return rest, nil
}
