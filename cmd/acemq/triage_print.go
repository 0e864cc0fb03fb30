package main

import (
	"fmt"
	"strings"

	"github.com/acemq/acemq/internal/escape"
)

const stamp = "2006-01-02 15:04:05Z"

func (a *app) printTriage(out triageOut) {
	if out.Partitions != nil {
		queues := make([]string, len(out.Partitions))
		for i, p := range out.Partitions {
			queues[i] = p.Queue
		}
		fmt.Fprintf(a.stdout, "%s: %s (%s), %d ready, read %d in %d groups (none consumed)\n", escape.String(out.Queue), plural(len(queues), "partition"), setLabel(queues),
			out.Depth, out.Read, len(out.Groups))
	} else {
		fmt.Fprintf(a.stdout, "%s: %d ready, read %d in %d groups (none consumed)\n", out.Queue, out.Depth, out.Read, len(out.Groups))
	}
	for _, g := range out.Groups {
		attempts := fmt.Sprint(g.MinAttempt)
		if g.MaxAttempt != g.MinAttempt {
			attempts += "-" + fmt.Sprint(g.MaxAttempt)
		}
		fmt.Fprintf(a.stdout, "\n%s  %s  %s  attempts %s\n  reason:  %s\n", g.ID, countOf(g.Count), g.Kind, attempts, escape.String(g.Key))
		if len(g.Queues) > 0 {
			in := make([]string, len(g.Queues))
			for i, c := range g.Queues {
				in[i] = fmt.Sprintf("%s %d", escape.String(c.Queue), c.Count)
			}
			fmt.Fprintf(a.stdout, "  in:      %s\n", strings.Join(in, ", "))
		}
		if g.FirstCreated != nil {
			fmt.Fprintf(a.stdout, "  created: %s .. %s\n", g.FirstCreated.Format(stamp), g.LastCreated.Format(stamp))
		}
		if g.FirstDeadLettered != nil {
			fmt.Fprintf(a.stdout, "  dead-lettered by the broker: %s .. %s\n", g.FirstDeadLettered.Format(stamp), g.LastDeadLettered.Format(stamp))
		}
		sample := escape.String(orDash(g.SampleID))
		if g.SampleQueue != "" {
			sample += " in " + escape.String(g.SampleQueue)
		}
		fmt.Fprintf(a.stdout, "  sample:  %s  %s\n", sample, g.SampleBody)
	}
	if len(out.Groups) > 0 {
		fmt.Fprintf(a.stdout, "\nact on a group: acemq triage %s --replay GROUP, or --discard GROUP --why TEXT --to-file F.jsonl\n", out.Queue)
	}
}

func (a *app) printAction(r actionOut) {
	verb := "replayed to"
	if r.Action == "discard" {
		verb = "archived in"
	}
	fmt.Fprintf(a.stdout, "%s: group %s, %s when read: %d %s %s, %d left\n", r.Queue, escape.String(r.Group), countOf(r.Matched), r.Moved, verb, escape.String(r.To), r.Left)
	if r.Grew > 0 || r.Moved > r.Matched {
		fmt.Fprintf(a.stdout, "%s: the queue grew by %d while it was read (%d taken, %d ready when triage began: another reader gave messages back, or new ones came); every one moved was of the group\n",
			r.Queue, r.Grew, r.Taken, r.Before)
	}
	if gone := r.Matched - r.Moved - r.Left; r.Stopped == stoppedDrained && gone > 0 {
		fmt.Fprintf(a.stdout, "%s: %d of the group counted when read were no longer there: another reader took them meanwhile\n", r.Queue, gone)
	}
	fmt.Fprintf(a.stdout, "%s: %s ready before, %s after\n", r.Queue, countOf(r.Before), countAfter(r.After))
}

func countOf(n int) string {
	if n == 1 {
		return "1 message"
	}
	return fmt.Sprintf("%d messages", n)
}

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
	fmt.Fprintf(a.stdout, "%s: group %s, %s in %s when read: %d %s, %d left; in those, %s ready before, %s after\n",
		escape.String(r.Queue), escape.String(r.Group), countOf(r.Matched), plural(len(r.Partitions), "partition"), r.Moved, verb, r.Left, countOf(r.Before), countAfter(r.After))
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
