package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/transport"
)

// Triage of a partitioned queue's dead letters: acemq triage orders.dlq,
// when orders is partitioned (there is no orders.dlq, and there are
// orders.p0.dlq, orders.p1.dlq, ...), or acemq triage 'orders.p*.dlq',
// reads every partition's .dlq (or .parked) and groups their messages
// together, each group saying how many each partition holds; a replay
// sends each message back to its own partition, the queue its .dlq
// belongs to.

// triageSource is one queue a triage read.
type triageSource struct {
	Queue string `json:"queue"`
	Depth int    `json:"depth"`
	Read  int    `json:"read"`
}

// partitionWildcard is how a partitioned queue's set-aside queues are
// named at once: orders.p*.dlq.
const partitionWildcard = ".p*"

// triageSet is the queues acemq triage name reads: name itself; or, for
// Q.p*.dlq (or .parked), and for Q.dlq when there is no Q.dlq, the
// partitions' Q.p0.dlq, Q.p1.dlq, ... up to the first that is not there.
// partitioned says the set is a partitioned queue's, even of one
// partition.
func (a *app) triageSet(t transport.Transport, name string) (queues []string, partitioned bool, err error) {
	base, suffix, wild := strings.Cut(name, partitionWildcard)
	if !wild {
		q, ok := queueOf(name)
		if !ok {
			return []string{name}, false, nil
		}
		if _, err := t.Inspect(a.ctx, name); !errors.Is(err, transport.ErrNotFound) {
			return []string{name}, false, nil // there, or an error the read will meet and say
		}
		base, suffix = q, strings.TrimPrefix(name, q)
	} else if base == "" || (suffix != acemq.DeadLetterQueue("") && suffix != acemq.ParkedQueue("")) {
		return nil, false, fmt.Errorf("%s: a partitioned queue's set-aside queues are named Q.p*.dlq or Q.p*.parked", escape.String(name))
	}
	for i := 0; i < maxPartitions; i++ {
		q := acemq.PartitionName(base, i) + suffix
		_, err := t.Inspect(a.ctx, q)
		if errors.Is(err, transport.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		queues = append(queues, q)
	}
	if len(queues) == 0 {
		if wild {
			return nil, false, fmt.Errorf("%s: no partition of %s has a %s queue (%s is not there)", escape.String(name), escape.String(base), suffix, escape.String(acemq.PartitionName(base, 0)+suffix))
		}
		return []string{name}, false, nil // not partitioned either: the read says it is not there
	}
	return queues, true, nil
}

// countIn is how many of group g queue q held when it was read.
func countIn(g triageGroup, q string) int {
	for _, c := range g.Queues {
		if c.Queue == q {
			return c.Count
		}
	}
	return 0
}

// setMove is a replay or discard of a group over a set's queues.
type setMove struct {
	name    string // as given: orders.dlq
	action  string // replay or discard
	sources []triageSource
	group   triageGroup
	sel     string
	flags   moveFlags // the move of each queue (moveGroup); flags.limit counted over them all
}

// moveSet moves the group out of each queue that held some of it when read,
// one after the other, --limit counted over them all, and adds up what
// each move counted. It stops at the first error or interruption: the
// queues after it are not touched, and what they hold of the group is
// counted left.
func (a *app) moveSet(t transport.Transport, m setMove) (actionOut, error) {
	total := actionOut{Queue: m.name, Group: m.sel, Action: m.action, Matched: m.group.Count, Stopped: stoppedDrained}
	remaining := m.flags.limit
	var err error
	for _, src := range m.sources {
		matched := countIn(m.group, src.Queue)
		if matched == 0 {
			continue // the move reads only the partitions that hold some of the group
		}
		total.Before += src.Depth
		res := actionOut{Queue: src.Queue, Group: m.sel, Action: m.action, Matched: matched, Before: src.Depth}
		switch {
		case err != nil || total.Interrupted || (m.flags.limit > 0 && remaining == 0):
			res.Left, res.Stopped, res.After = matched, stoppedLimit, a.settle(t, src.Queue, 0)
			if err != nil || total.Interrupted {
				res.Stopped = "not reached"
			}
		default:
			err = a.moveGroup(t, &res, m.flags, remaining)
			if remaining > 0 {
				remaining -= res.Moved
			}
		}
		total.Moved, total.Left, total.Taken, total.Grew, total.After = total.Moved+res.Moved, total.Left+res.Left, total.Taken+res.Taken, total.Grew+res.Grew, sumCounts(total.After, res.After)
		if res.Stopped != stoppedDrained && total.Stopped == stoppedDrained {
			total.Stopped = res.Stopped
		}
		total.Interrupted = total.Interrupted || res.Interrupted
		switch {
		case res.To == "" || total.To == res.To: // not reached, or the same
		case total.To == "":
			total.To = res.To
		default:
			total.To = eachPartition
		}
		total.Partitions = append(total.Partitions, res)
	}
	if err != nil {
		total.Error = a.redact(escapeErr(err))
	}
	return total, err
}

// eachPartition is a replay's destination when each message went back to
// its own partition.
const eachPartition = "each partition's queue"

// triageMoveSet is acemq triage --replay or --discard on a partitioned
// queue's set-aside queues: the group moved out of each partition's queue
// in turn, a replay to that partition (the queue its .dlq belongs to,
// unless --to), a discard into the one archive, each message with its own
// partition's .dlq as where it came from.
func (a *app) triageMoveSet(fs *flag.FlagSet, t transport.Transport, out triageOut, group triageGroup, sel string, f moveFlags) int {
	m := setMove{name: out.Queue, action: "discard", sources: out.Partitions, group: group, sel: sel, flags: f}
	if f.replay {
		m.action = "replay"
	}
	res, err := a.moveSet(t, m)
	return a.moveDone(fs, res, err, f.asJSON, a.printSetAction)
}
