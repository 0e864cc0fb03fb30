package acemq

import (
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq/internal/queueargs"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// checkPartitioning refuses the settings of a partitioned or ordered queue
// that cannot mean what they say.
func checkPartitioning(c QueueConfig) error {
	switch {
	case c.Partitions < 0:
		return fmt.Errorf("Partitions %d; it must be zero (one queue) or above", c.Partitions)
	case c.Partitions > 0 && len(c.Bindings) > 0:
		return errors.New("Bindings on a partitioned queue: an exchange gives a copy to every partition bound to it; bind the exchange's messages to one queue, or publish to Partitioned.For(key)")
	case c.Ordered && !queueargs.Quorum(c.Args):
		return queueargs.CheckOrdered(c.Args)
	case c.Ordered && c.Concurrency > 1:
		return fmt.Errorf("Ordered with Concurrency %d: an ordered queue runs one handler at a time", c.Concurrency)
	case c.Ordered:
		return queueargs.CheckOrdered(c.Args)
	}
	return nil
}

// physicalQueues are the queues a Mux entry's name stands for: itself, or
// its partitions.
func physicalQueues(name string, c QueueConfig) []string {
	if c.Partitions == 0 {
		return []string{name}
	}
	return Partitioned{Queue: name, Count: c.Partitions}.Queues()
}

// orderedArgs adds single active consumer to args when the queue is
// ordered, leaving args itself alone.
func orderedArgs(args map[string]any, ordered bool) map[string]any {
	return queueargs.Ordered(args, ordered)
}

// configFor finds the settings of a queue the server consumes: its own
// entry, or its partitioned queue's.
func (s *Server) configFor(queue string) QueueConfig {
	if c, ok := s.Queues[queue]; ok {
		return c
	}
	if part, ok := s.partitionOf(queue); ok {
		return s.Queues[part.Queue]
	}
	return QueueConfig{}
}

// partitionOf says which partition queue is, when it is one of a queue
// this server consumes partitioned.
func (s *Server) partitionOf(queue string) (Partition, bool) {
	base, i, ok := splitPartition(queue)
	if !ok {
		return Partition{}, false
	}
	c, ok := s.Queues[base]
	if !ok || i >= c.Partitions {
		return Partition{}, false
	}
	return Partition{Queue: base, Index: i, Count: c.Partitions}, true
}

// receiver makes the Message of a delivery for the engine, with its
// partition when the server consumes partitioned queues; the engine keeps
// a pointer to its envelope: one allocation a delivery.
func (s *Server) receiver() func(transport.Delivery, func() time.Time) (any, *wire.Envelope) {
	parts := make(map[string]Partition)
	for name, c := range s.Queues {
		for i := range c.Partitions {
			parts[PartitionName(name, i)] = Partition{Queue: name, Index: i, Count: c.Partitions}
		}
	}
	if len(parts) == 0 {
		return receive
	}
	return func(d transport.Delivery, now func() time.Time) (any, *wire.Envelope) {
		m := newMessage(d, now)
		m.partition = parts[d.Queue]
		return m, &m.env
	}
}

// spreadPartition gives partition i's own queue in top its home node
// (transport.Queue.Home), so that a transport that knows several nodes of
// a cluster declares partition i through node i modulo their number, and
// the partitions' leaders spread over the cluster: RabbitMQ's default
// leader locator is client-local. Its .dlq, .parked and rungs have none.
func spreadPartition(top transport.Topology, queue string, i int) {
	for k := range top.Queues {
		if top.Queues[k].Name == queue {
			top.Queues[k].Home = i + 1
		}
	}
}
