package acemq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/logging"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// queueRuns resolves each queue the handler serves against the server's
// defaults, once, at Run: what the engine reads for the rest of the run.
// A Queues key that names no served queue is refused: a typo ("ordres")
// would otherwise leave the real queue without its policy, silently.
func (s *Server) queueRuns() ([]engine.Queue, error) {
	if s.Handler == nil {
		return nil, errors.New("acemq: Server.Handler is nil")
	}
	named, ok := s.Handler.(interface{ Queues() []string })
	if !ok || len(named.Queues()) == 0 {
		return nil, ErrNoQueues
	}
	names := named.Queues()
	var unknown []string
	for k := range s.Queues {
		if !slices.Contains(names, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("acemq: Server.Queues has settings for %q, which the handler does not serve (it serves %s)",
			strings.Join(unknown, `", "`), strings.Join(names, ", "))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Throttles)) {
		if err := s.Throttles[name].check(); err != nil {
			return nil, fmt.Errorf("acemq: Server.Throttles[%q]: %v", name, err)
		}
	}
	var runs []engine.Queue
	for _, name := range names {
		c := s.Queues[name]
		if err := s.throttleNames(name, c.Throttles); err != nil {
			return nil, err
		}
		for j, b := range c.Bindings {
			if err := b.check(); err != nil {
				return nil, fmt.Errorf("acemq: Server.Queues[%q].Bindings[%d]: %v", name, j, err)
			}
		}
		if err := checkPartitioning(c); err != nil {
			return nil, fmt.Errorf("acemq: Server.Queues[%q]: %v", name, err)
		}
		for j, physical := range physicalQueues(name, c) {
			if physical != name && slices.Contains(names, physical) {
				return nil, fmt.Errorf("acemq: Server.Queues[%q] has %d partitions, and the handler also serves %q, one of them", name, c.Partitions, physical)
			}
			q, err := s.resolve(physical, c)
			if err != nil {
				return nil, fmt.Errorf("acemq: Server.Queues[%q]: %v", name, err)
			}
			if c.Partitions > 0 {
				spreadPartition(q.Topology, physical, j)
			}
			runs = append(runs, q)
		}
	}
	return runs, nil
}

// resolve settles the settings of one queue, or one partition, from c:
// its own where set, else the server's, else the defaults; and the
// arguments it is declared with (those of c, with its delivery limit and
// its order). When c's delivery limit cannot be declared it says why,
// and the queue has c's arguments as they are, for Decide.
func (s *Server) resolve(name string, c QueueConfig) (engine.Queue, error) {
	args, err := deliveryLimitArgs(name, c)
	if err != nil {
		args = c.Args
	}
	q := engine.Queue{
		Name:          name,
		Policy:        c.Retry,
		Declare:       !c.NoDeclare && !s.NoDeclare,
		Args:          orderedArgs(args, c.Ordered),
		Subscriptions: subscriptions(name, c.Bindings),
		Strict:        c.StrictDeliveryLimit,
		DeadLetter:    DeadLetterQueue(name),
		Parked:        ParkedQueue(name),
		Throttles:     c.Throttles,
		Breaker:       cmp.Or(c.Breaker, s.Breaker).settings(),
	}
	if q.Policy.IsZero() {
		q.Policy = s.Retry
	}
	q.Concurrency = firstPositive(c.Concurrency, s.Concurrency, DefaultConcurrency)
	if c.Ordered {
		q.Concurrency = 1
	}
	q.Prefetch = max(firstPositive(c.Prefetch, s.Prefetch, DefaultPrefetch), q.Concurrency)
	q.Topology = Topology(name, q.Policy, q.Args)
	return q, err
}

// engineConfig is what the engine of one Run reads of the server.
func (s *Server) engineConfig() engine.Config {
	return engine.Config{
		Transport:        s.Transport,
		Receive:          s.receiver(),
		Serve:            serveWith(s.Handler),
		BeforeDeadLetter: beforeDeadLetter,
		Logger:           logging.Or(s.Logger),
		Clock:            clockOf(s.Transport, s.Clock),
		MeterProvider:    s.MeterProvider,
		TracerProvider:   s.TracerProvider,
		Propagator:       s.Propagator,
		PublishTimeout:   s.publishTimeout(),
		ShutdownTimeout:  s.shutdownTimeout(),
		HandlerTimeout:   s.handlerTimeout(),
		WaitBound:        DefaultHandlerTimeout,
		RedeliverEvery:   cmp.Or(s.redeliverEvery, RedeliverEvery),
		Ready:            s.markReady,
		Throttles:        s.engineThrottles(),
	}
}

// receive makes the Message of a delivery for the engine, which keeps a
// pointer to its envelope: one allocation a delivery.
func receive(d transport.Delivery, now func() time.Time) (any, *wire.Envelope) {
	m := newMessage(d, now)
	return m, &m.env
}

// serveWith calls h with the Message receive made.
func serveWith(h Handler) func(context.Context, any) ack.Ack {
	return func(ctx context.Context, m any) ack.Ack { return h.ServeMessage(ctx, m.(*Message)) }
}

func firstPositive(ns ...int) int {
	for _, n := range ns {
		if n > 0 {
			return n
		}
	}
	return 0
}
