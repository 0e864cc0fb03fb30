package main

import (
	"errors"
	"fmt"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
)

// strayOut is a queue on the broker that a server with the settings given
// does not consume though it looks like the queue's: the queue unpartitioned
// while it is declared partitioned, a partition past the count (of an
// earlier, larger count), or partitions while it is declared unpartitioned.
// What it holds waits there for nobody.
type strayOut struct {
	Queue     string `json:"queue"`
	Messages  int    `json:"messages"` // ready
	Consumers int    `json:"consumers"`
	Why       string `json:"why"`
}

// strays looks, after an apply, for the queues of s that another count of
// partitions would have declared: Q itself or Q.p{N} onwards for a
// partitioned queue, Q.p0 onwards for one that is not.
func (a *app) strays(t transport.Transport, s queueSpec) ([]strayOut, error) {
	var out []strayOut
	look := func(q, why string) (bool, error) {
		info, err := t.Inspect(a.ctx, q)
		if errors.Is(err, transport.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("look for %q: %w", q, err)
		}
		out = append(out, strayOut{Queue: q, Messages: info.Messages, Consumers: info.Consumers, Why: why})
		return true, nil
	}
	if s.partitions > 0 {
		if _, err := look(s.name, fmt.Sprintf("the queue unpartitioned: a server with %s does not consume it", plural(s.partitions, "partition"))); err != nil {
			return nil, err
		}
	}
	for i := s.partitions; i < maxPartitions; i++ {
		why := fmt.Sprintf("a partition past --partitions %d (of an earlier count): a server with %s does not consume it", s.partitions, plural(s.partitions, "partition"))
		if s.partitions == 0 {
			why = "a partition of the queue: a server of the queue unpartitioned does not consume it (is --partitions missing?)"
		}
		found, err := look(acemq.PartitionName(s.name, i), why)
		if err != nil {
			return nil, err
		}
		if !found {
			break
		}
	}
	return out, nil
}

// printStrays says each stray queue and what it holds.
func (a *app) printStrays(strays []strayOut) {
	for _, s := range strays {
		fmt.Fprintf(a.stdout, "(%s exists, %s ready, %s: %s)\n", s.Queue, countOf(s.Messages), plural(s.Consumers, "consumer"), s.Why)
	}
}
