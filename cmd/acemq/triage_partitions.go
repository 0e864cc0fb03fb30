package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/internal/triage"
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

// scanSet reads the queues of a set, each as scan reads one (up to limit
// messages in all, all of them when 0), groups their messages together,
// and gives them all back, each queue's once it is read. With
// partitioned, each message is grouped with the queue it was read from.
func (a *app) scanSet(t transport.Transport, name string, queues []string, depths []int, partitioned bool, limit, excerpt int, every time.Duration, asJSON bool) (triageOut, error) {
	out := triageOut{Queue: name, Groups: []triageGroup{}}
	total := 0
	for _, d := range depths {
		total += d
	}
	out.Depth = total
	if limit == 0 {
		limit = total
	}
	var g triage.Grouper
	prog := a.newProgress(name+": read", min(limit, total), progressOf(every, asJSON))
	var err error
	for i, q := range queues {
		src := triageSource{Queue: q, Depth: depths[i]}
		from := ""
		if partitioned {
			from = q
		}
		if want := limit - out.Read; want > 0 && err == nil && (depths[i] > 0 || len(queues) == 1) {
			if len(queues) > 1 {
				want = min(want, depths[i]) // each partition's share: what it held
			}
			done := out.Read
			src.Read, err = a.borrow(t, q, want, func(d transport.Delivery) {
				env := acemq.EnvelopeOf(d)
				g.Add(triage.Message{ID: env.ID, Reason: env.Error, Attempt: env.Attempt, Created: env.CreatedAt, DeadLettered: deadLettered(d.Headers), Body: d.Body, Queue: from})
				done++
				prog.set(done)
			})
			out.Read += src.Read
		}
		if partitioned {
			out.Partitions = append(out.Partitions, src)
		}
	}
	prog.stop()
	for _, gr := range g.Groups() {
		out.Groups = append(out.Groups, triageGroup{Group: gr, SampleBody: escape.Cut(string(gr.SampleBody), excerpt)})
	}
	return out, err
}

// setLabel is a set's name for a heading: "orders.p0.dlq .. orders.p3.dlq".
func setLabel(queues []string) string {
	switch len(queues) {
	case 0:
		return ""
	case 1:
		return escape.String(queues[0])
	}
	return escape.String(queues[0]) + " .. " + escape.String(queues[len(queues)-1])
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
	limit   int
	// one moves the group's messages out of one queue, want of them at
	// most (0: all), filling in res; the set's loop counts the rest.
	one func(res *actionOut, want, limit int) error
}

// run moves the group out of each queue that held some of it when read,
// one after the other, --limit counted over them all, and adds up what
// each move counted. It stops at the first error or interruption: the
// queues after it are not touched, and what they hold of the group is
// counted left.
func (a *app) moveSet(t transport.Transport, m setMove) (actionOut, error) {
	total := actionOut{Queue: m.name, Group: m.sel, Action: m.action, Matched: m.group.Count, Stopped: stoppedDrained}
	remaining := m.limit
	var err error
	for _, src := range m.sources {
		matched := countIn(m.group, src.Queue)
		if matched == 0 {
			continue // the move reads only the partitions that hold some of the group
		}
		total.Before += src.Depth
		res := actionOut{Queue: src.Queue, Group: m.sel, Action: m.action, Matched: matched, Before: src.Depth}
		switch {
		case err != nil || total.Interrupted || (m.limit > 0 && remaining == 0):
			res.Left, res.Stopped, res.After = matched, stoppedLimit, a.settle(t, src.Queue, 0)
			if err != nil || total.Interrupted {
				res.Stopped = "not reached"
			}
		default:
			a.settle(t, src.Queue, src.Depth)
			want := matched
			if remaining > 0 {
				want = min(want, remaining)
			}
			err = m.one(&res, want, remaining)
			res.Interrupted = a.ctx.Err() != nil
			if err != nil && res.Stopped == "" { // the move did not start
				res.Stopped, res.After = stoppedError, a.settle(t, src.Queue, 0)
			}
			if err != nil {
				res.Error = a.redact(escape.String(err.Error()))
			}
			if remaining > 0 {
				remaining -= res.Moved
			}
		}
		total.Moved, total.Left, total.Taken, total.Grew, total.After = total.Moved+res.Moved, total.Left+res.Left, total.Taken+res.Taken, total.Grew+res.Grew, total.After+res.After
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
		total.Error = a.redact(escape.String(err.Error()))
	}
	return total, err
}

// eachPartition is a replay's destination when each message went back to
// its own partition.
const eachPartition = "each partition's queue"

// printSetAction is a set's move: each partition's lines, as a move of
// one queue says them, then the totals.
func (a *app) printSetAction(r actionOut) {
	for _, p := range r.Partitions {
		if p.To == "" { // not reached
			why := "the move stopped before it"
			if p.Stopped == stoppedLimit {
				why = "--limit was reached before it"
			}
			fmt.Fprintf(a.stdout, "%s: not reached (%s): %d of the group left\n", escape.String(p.Queue), why, p.Left)
			continue
		}
		a.printAction(p)
	}
	verb := "replayed, each to its own partition's queue"
	switch {
	case r.Action == "discard":
		verb = "archived in " + escape.String(r.To)
	case r.To != eachPartition:
		verb = "replayed to " + escape.String(r.To)
	}
	fmt.Fprintf(a.stdout, "%s: group %s, %s in %s when read: %d %s, %d left; in those, %s ready before, %d after\n",
		escape.String(r.Queue), escape.String(r.Group), countOf(r.Matched), plural(len(r.Partitions), "partition"), r.Moved, verb, r.Left, countOf(r.Before), r.After)
}

// setFlags are acemq triage's flags for a move.
type setFlags struct {
	replay                             bool
	to, toFile, toQueue, operator, why string
	limit                              int
	keep                               bool
	every                              time.Duration
	asJSON                             bool
}

// triageMoveSet is acemq triage --replay or --discard on a partitioned
// queue's set-aside queues: the group moved out of each partition's queue
// in turn, a replay to that partition (the queue its .dlq belongs to,
// unless --to), a discard into the one archive, each message with its own
// partition's .dlq as where it came from.
func (a *app) triageMoveSet(fs *flag.FlagSet, t transport.Transport, out triageOut, group triageGroup, sel string, f setFlags) int {
	m := setMove{name: out.Queue, action: "discard", sources: out.Partitions, group: group, sel: sel, limit: f.limit}
	if f.replay {
		m.action = "replay"
		m.one = func(res *actionOut, want, limit int) error {
			return a.triageReplay(t, res, f.to, want, limit, f.keep, f.every)
		}
	} else {
		m.one = func(res *actionOut, want, limit int) error {
			arch, err := a.openArchive(t, f.toFile, f.toQueue, res.Queue, sel, f.operator, f.why)
			if err != nil {
				return err
			}
			res.Action, res.To = "discard", arch.name()
			err = a.triageDiscard(t, res, arch, want, limit, f.every)
			if cerr := arch.close(); cerr != nil && err == nil {
				err = cerr
			}
			return err
		}
	}
	res, err := a.moveSet(t, m)
	if f.asJSON {
		a.printJSON(res)
	} else {
		a.printSetAction(res)
	}
	switch {
	case res.Interrupted:
		fmt.Fprintf(a.stderr, "interrupted: moved %d, left %d\n", res.Moved, res.Left)
		return exitError
	case err != nil:
		return a.fail(fs, errors.New(res.Error))
	}
	return exitOK
}
