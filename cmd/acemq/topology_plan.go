package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/queueargs"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// queueSpec is a work queue as acemq topology is told it: the settings of
// its acemq.QueueConfig that decide what a Server declares for it.
type queueSpec struct {
	name          string
	policy        retry.Policy
	args          map[string]any // QueueConfig.Args
	partitions    int            // QueueConfig.Partitions; 0: one queue
	ordered       bool           // QueueConfig.Ordered
	deliveryLimit int            // QueueConfig.DeliveryLimit
}

// physical is one queue a spec stands for (the queue itself, or one of its
// partitions) and what a Server declares for it.
type physical struct {
	name     string
	index    int // the partition's; 0 when not partitioned
	topology transport.Topology
}

// queues are the queues a Server with s's settings declares, each with the
// arguments it declares it with: the queue itself, or Q.p0 .. Q.p{N-1},
// each a whole queue of its own (acemq.Partitioned, acemq.Topology, the
// delivery limit and single active consumer of internal/queueargs, as
// Server.Run computes them), so that what acemq topology declares is what
// the Server then declares too, argument for argument.
func (s queueSpec) queues() ([]physical, error) {
	switch {
	case s.partitions < 0:
		return nil, fmt.Errorf("--partitions %d: zero (one queue) or above", s.partitions)
	case s.partitions > maxPartitions:
		return nil, fmt.Errorf("--partitions %d: acemq's tools look for at most %d partitions of a queue", s.partitions, maxPartitions)
	}
	if s.ordered {
		if err := queueargs.CheckOrdered(s.args); err != nil {
			return nil, fmt.Errorf("--ordered: %w", err)
		}
	}
	names := []string{s.name}
	if s.partitions > 0 {
		names = acemq.Partitioned{Queue: s.name, Count: s.partitions}.Queues()
	}
	out := make([]physical, len(names))
	for i, name := range names {
		args := s.args
		if s.deliveryLimit != 0 {
			var err error
			if args, err = queueargs.DeliveryLimit(name, args, s.deliveryLimit); err != nil {
				return nil, fmt.Errorf("--delivery-limit: %w", err)
			}
		}
		top := acemq.Topology(name, s.policy, queueargs.Ordered(args, s.ordered))
		if s.partitions > 0 {
			// As a Server does (spreadPartition): partition i is declared
			// through node i of the URLs given, so that on a cluster the
			// partitions' leaders spread (transport.Queue.Home).
			for k := range top.Queues {
				if top.Queues[k].Name == name {
					top.Queues[k].Home = i + 1
				}
			}
		}
		out[i] = physical{name: name, index: i, topology: top}
	}
	return out, nil
}

// topologyPlan is what topology declares, in its order: each queue's own
// topology, then the delay queues, then the queues' bindings to them (which
// need both).
type topologyPlan struct {
	spec   queueSpec  // the name is "" without --queue
	queues []physical // the queue, or its partitions
	delays transport.Topology
	binds  []transport.Binding // with --delays and --queue, one a queue
	kind   string              // the delay queues' type: "quorum", "classic"; "" without them
}

// all is the whole plan as one topology, each exchange once (every
// queue's topology names acemq.retry and acemq.dlx).
func (p *topologyPlan) all() transport.Topology {
	var t transport.Topology
	parts := make([]transport.Topology, 0, len(p.queues)+2)
	for _, q := range p.queues {
		parts = append(parts, q.topology)
	}
	parts = append(parts, p.delays, transport.Topology{Bindings: p.binds})
	seen := make(map[string]bool)
	for _, part := range parts {
		for _, x := range part.Exchanges {
			if !seen[x.Name] {
				seen[x.Name] = true
				t.Exchanges = append(t.Exchanges, x)
			}
		}
		t.Queues = append(t.Queues, part.Queues...)
		t.Bindings = append(t.Bindings, part.Bindings...)
		t.ExchangeBindings = append(t.ExchangeBindings, part.ExchangeBindings...)
	}
	return t
}

// bindFor is q's binding to the delay queues in the plan, if it has one.
func (p *topologyPlan) bindFor(q string) (transport.Binding, bool) {
	for _, b := range p.binds {
		if b.Queue == q {
			return b, true
		}
	}
	return transport.Binding{}, false
}

// declarePlan declares p as a server would: the delay queues as quorum
// queues where the broker can hold them, else classic; and classic ones
// kept where an older broker declared them so (RabbitMQ refuses to change
// a queue's type). It returns a line to print about the delay queues'
// type when they are classic.
func (a *app) declarePlan(t transport.Transport, p *topologyPlan) (string, error) {
	var note string
	for _, q := range p.queues {
		if err := t.Declare(a.ctx, q.topology); err != nil {
			return "", fmt.Errorf("declare the topology of %q: %w", q.name, err)
		}
	}
	if p.kind != "" {
		if v, ok := t.(transport.Versioned); ok {
			product, version, err := v.BrokerVersion(a.ctx)
			if err != nil {
				return "", fmt.Errorf("declare the delay queues: %w", err)
			}
			if !delay.SupportsQuorum(product, version) {
				p.delays, p.kind = delay.ClassicTopology(), "classic"
				note = fmt.Sprintf("(%s cannot hold quorum queues with at-least-once dead-lettering, so the delay queues are classic: a node lost while messages wait on them loses those messages)",
					strings.TrimSpace(product+" "+version))
			}
		}
		err := t.Declare(a.ctx, p.delays)
		if p.kind == "quorum" && errors.Is(err, transport.ErrPreconditionFailed) {
			if t.Declare(a.ctx, delay.ClassicTopology()) == nil {
				p.delays, p.kind, err = delay.ClassicTopology(), "classic", nil
				note = "(the delay queues exist as classic queues, declared so by an older broker, and are kept: a node lost while messages wait on them loses those messages; " +
					"to have quorum ones, delete them when acemq delays shows them empty, and apply again)"
			}
		}
		if err != nil {
			return "", fmt.Errorf("declare the delay queues: %w", err)
		}
	}
	for _, b := range p.binds {
		if err := t.Declare(a.ctx, transport.Topology{Bindings: []transport.Binding{b}}); err != nil {
			return "", fmt.Errorf("bind queue %q to %s: %w", b.Queue, b.Exchange, err)
		}
	}
	return note, nil
}
