package main

import (
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/acemq/acemq/internal/escape"
)

// printPartitions is status's table of partitioned queues: a line with a
// set's totals, "orders (4 partitions)", and under it a line per
// partition with the same columns, so that a partition with all the
// backlog, or none of the consumers, stands out. The columns are the
// partition's work queue's counts, then the messages in its .dlq, its
// .parked and on its rungs: the family of each partition in one line.
func (a *app) printPartitions(services []service, notes *statusNotes) {
	ordered := slices.ContainsFunc(services, func(s service) bool {
		return slices.ContainsFunc(s.Partitions, func(p partition) bool { return p.ordered() })
	})
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	head := "PARTITIONED QUEUE\tREADY\tUNACKED\tCONSUMERS\tDLQ\tPARKED\tRETRYING\tIN/S\tOUT/S\tNODE"
	if ordered {
		head += "\tACTIVE CONSUMER"
	}
	fmt.Fprintln(tw, head+"\tSTATE")
	line := func(name string, l partitionLine, node, active, state string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", name, l.ready, l.unacked, l.consumers, l.dlq, l.parked, l.retrying,
			rate(l.publish), rate(l.deliver), escape.String(node))
		if ordered {
			fmt.Fprintf(tw, "\t%s", active)
		}
		fmt.Fprintf(tw, "\t%s\n", state)
	}
	cells := 10
	if ordered {
		cells++
	}
	for _, s := range services {
		if s.Partitions == nil {
			continue
		}
		var total partitionLine
		for i, p := range s.Partitions {
			total = total.plus(lineOf(p.service), i == 0)
		}
		line(escape.String(partitionsLabel(s)), total, partitionNodes(s), "", partitionState(s))
		for _, p := range s.Partitions {
			w := p.work()
			for _, q := range p.Queues {
				notes.add(q)
				notes.unsampledPartitions = notes.unsampledPartitions || q.NotSampledYet
			}
			active := ""
			if p.ordered() {
				active = activeText(w)
			}
			state := w.State
			if w.Missing {
				state = "missing"
			}
			line("  "+escape.String(p.Queue), lineOf(p.service), orDash(w.Node), active, state)
			for _, m := range p.Breakers {
				fmt.Fprintf(tw, "    breaker %s%s%s\n", escape.String(orDash(m.Instance)), strings.Repeat("\t", cells), breakerText(a.now(), m))
				notes.breakers = appendNew(notes.breakers, escape.String(p.Queue))
			}
		}
		if idle := idlePartitions(s); len(idle) > 0 {
			for _, q := range idle {
				notes.idle = append(notes.idle, escape.String(q))
			}
			notes.idleOf = append(notes.idleOf, escape.String(s.Queue))
		}
	}
	_ = tw.Flush()
}

// activeText is an ordered partition's active consumer as its line says
// it: the tag, escaped (a client chose it), "none" without consumers, or
// "?" when the management API has not said.
func activeText(w queueStat) string {
	switch {
	case w.ActiveConsumer != "":
		return escape.String(w.ActiveConsumer)
	case w.Consumers != nil && *w.Consumers == 0:
		return "none"
	}
	return "?"
}
