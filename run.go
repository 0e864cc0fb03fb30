package acemq

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// queueRuns resolves each queue the handler serves against the server's
// defaults, once, at Run: what the engine reads for the rest of the run.
// A Queues key that names no served queue is refused: a typo ("ordres")
// would otherwise leave the real queue without its policy, silently.
func (s *Server) queueRuns() ([]*queueRun, error) {
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
	runs := make([]*queueRun, len(names))
	for i, name := range names {
		runs[i] = s.resolve(name)
		args, err := deliveryLimitArgs(name, s.Queues[name])
		if err != nil {
			return nil, fmt.Errorf("acemq: Server.Queues[%q]: %v", name, err)
		}
		runs[i].args = args
		for j, b := range runs[i].bindings {
			if err := b.check(); err != nil {
				return nil, fmt.Errorf("acemq: Server.Queues[%q].Bindings[%d]: %v", name, j, err)
			}
		}
	}
	return runs, nil
}

// resolve settles one queue's settings: its own where set, else the
// server's, else the defaults.
func (s *Server) resolve(name string) *queueRun {
	c := s.Queues[name]
	q := &queueRun{
		name:       name,
		policy:     c.Retry,
		declare:    !c.NoDeclare && !s.NoDeclare,
		args:       c.Args,
		bindings:   c.Bindings,
		strict:     c.StrictDeliveryLimit,
		deadLetter: DeadLetterQueue(name),
		parked:     ParkedQueue(name),
		metrics:    newQueueMetrics(name),
	}
	if q.policy.IsZero() {
		q.policy = s.Retry
	}
	q.concurrency = firstPositive(c.Concurrency, s.Concurrency, DefaultConcurrency)
	q.prefetch = max(firstPositive(c.Prefetch, s.Prefetch, DefaultPrefetch), q.concurrency)
	return q
}

func firstPositive(ns ...int) int {
	for _, n := range ns {
		if n > 0 {
			return n
		}
	}
	return 0
}
