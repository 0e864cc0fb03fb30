package main

import (
	"slices"
	"strings"

	"github.com/acemq/acemq/internal/escape"
)

// The dashboard's partitioned queues (partitions.go): on the status page,
// a table of their own, as acemq status prints it (printPartitions): a
// line of a set's totals, a line per partition under it with the
// partition's breakers, an active-consumer column when a set is ordered,
// and a note on the partitions left without a consumer. The grouping is
// status's own (group, foldPartitions); this file only lays it out.

// webPartitioned is a partitioned queue as the status page shows it:
// every name escaped (escape.String) for the text.
type webPartitioned struct {
	Queue string // escaped
	Label string // "orders (4 partitions, ordered)", escaped
	Line  webLine
	Rows  []webPartitionRow
}

// webPartitionRow is one partition's line. Name is raw, the key of the
// page's Breakers; DLQ and Parked are raw too, for the links to their
// triage, which html/template percent-encodes.
type webPartitionRow struct {
	Name   string
	Queue  string // escaped
	Line   webLine
	DLQ    string // Q.pI.dlq when it is there and the dashboard reads it
	Parked string
	Idle   bool // no consumer while another partition of its set has one
}

// webLine is a line's cells, as acemq status prints them: counts, "?" for
// a queue not sampled yet, "missing", "-" for none; Node, Active and State
// escaped.
type webLine struct {
	Ready, Unacked, Consumers, DLQ, Parked, Retrying, In, Out, Node, Active, State string
}

func lineCells(l partitionLine, node, active, state string) webLine {
	return webLine{Ready: l.ready.String(), Unacked: l.unacked.String(), Consumers: l.consumers.String(), DLQ: l.dlq.String(), Parked: l.parked.String(),
		Retrying: l.retrying.String(), In: rate(l.publish), Out: rate(l.deliver), Node: escape.String(node), Active: active, State: escape.String(state)}
}

// partitionedPage is the status page's partitioned queues, whether any is
// ordered (the active-consumer column), and the note on partitions
// without a consumer, as status says it.
func (w *webUI) partitionedPage(services []service) (out []webPartitioned, ordered bool, idle string) {
	var idleNames, idleOf []string
	for _, s := range services {
		if s.Partitions == nil {
			continue
		}
		wp := webPartitioned{Queue: escape.String(s.Queue), Label: escape.String(partitionsLabel(s))}
		var total partitionLine
		for i, p := range s.Partitions {
			total = total.plus(lineOf(p.service), i == 0)
			ordered = ordered || p.ordered()
		}
		wp.Line = lineCells(total, partitionNodes(s), "", partitionState(s))
		idleSet := idlePartitions(s)
		for _, p := range s.Partitions {
			wk := p.work()
			active, state := "", wk.State
			if p.ordered() {
				active = activeText(wk)
			}
			if wk.Missing {
				state = "missing"
			}
			row := webPartitionRow{Name: p.Queue, Queue: escape.String(p.Queue), Line: lineCells(lineOf(p.service), orDash(wk.Node), active, state),
				Idle: slices.Contains(idleSet, p.Queue)}
			for _, q := range p.Queues {
				if q.Missing || !w.readable(q.Name) {
					continue
				}
				switch q.Role {
				case roleDLQ:
					row.DLQ = q.Name
				case roleParked:
					row.Parked = q.Name
				}
			}
			wp.Rows = append(wp.Rows, row)
		}
		if len(idleSet) > 0 {
			for _, q := range idleSet {
				idleNames = append(idleNames, escape.String(q))
			}
			idleOf = append(idleOf, escape.String(s.Queue))
		}
		out = append(out, wp)
	}
	if len(idleNames) > 0 {
		idle = "No consumer on " + strings.Join(idleNames, ", ") + ", while other partitions of " + strings.Join(idleOf, ", ") +
			" have one: the messages there wait while the rest are served. A server consumes every partition of the queue it serves, " +
			"so this one lost its consumer (its channel closed: see the server's log)."
	}
	return out, ordered, idle
}
