package main

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/transport"
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
	// DLQSet and ParkedSet are Q.p*.dlq and Q.p*.parked, raw, for the
	// links to the triage of every partition's at once (triagePartitions),
	// when a partition has one the dashboard reads.
	DLQSet, ParkedSet string
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
					row.DLQ, wp.DLQSet = q.Name, s.Queue+partitionWildcard+acemq.DeadLetterQueue("")
				case roleParked:
					row.Parked, wp.ParkedSet = q.Name, s.Queue+partitionWildcard+acemq.ParkedQueue("")
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

// errReadApart is a set's read refused because one partition's set-aside
// queue costs more than the redelivered mark to read: that one is read on
// its own page, where the read is confirmed first.
var errReadApart = errors.New("acemq: a partition's read costs more than the redelivered mark")

// setCost decides whether the dashboard may read a partitioned queue's
// set-aside queues at once: only when a read of each costs nothing but the
// redelivered mark (a .dlq or .parked without a delivery limit, its cost
// told by the management API). It returns the costs said.
func (w *webUI) setCost(a *app, set []string) (string, error) {
	var said []string
	for _, q := range set {
		if !w.readable(q) {
			return "", fmt.Errorf("%w: acemq web reads only .dlq, .parked and archive queues; %s is %s %s", errReadApart, escape.String(q), article(readKind(q)), readKind(q))
		}
		cost, err := a.readCost(a.ctx, w.t, w.cfg.mgmt, q)
		if errors.Is(err, transport.ErrNotFound) {
			return "", err
		}
		if err != nil || !cost.Free() {
			return "", fmt.Errorf("%w: %s: %s; the dashboard reads a partitioned queue's queues together only when no read costs more: open %s on its own, where its read is confirmed first",
				errReadApart, escape.String(q), cost, escape.String(q))
		}
		said = append(said, cost.String())
	}
	if len(said) == 1 {
		return said[0], nil
	}
	return fmt.Sprintf("%s; and so are the %d others", said[0], len(said)-1), nil
}

// triagePartitions is the triage page of a partitioned queue's set-aside
// queues, Q.p*.dlq or Q.p*.parked (triageSet): their groups together,
// each saying how many each partition holds and linking to the
// partition's own page, where its groups are replayed or discarded.
func (w *webUI) triagePartitions(rw http.ResponseWriter, r *http.Request, q string) {
	title := "triage " + q
	empty := webTriage{triageOut: triageOut{Queue: q, Groups: []triageGroup{}}}
	if !w.fromDashboard(r) {
		w.render(rw, http.StatusForbidden, "triage", title, empty,
			"this page reads queues, and this request does not show that it comes from the dashboard: open it from the dashboard's status page")
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	a := w.appFor(r)
	set, _, err := a.triageSet(w.t, q)
	code := http.StatusBadRequest // the name is not a set's (triageSet's own errors wrap nothing)
	if err == nil || errors.Unwrap(err) != nil {
		code = http.StatusBadGateway
	}
	var cost string
	if err == nil {
		cost, err = w.setCost(a, set)
	}
	var out triageOut
	if err == nil {
		out, err = w.scanPartitions(a, q, set)
	}
	switch {
	case err == nil:
		w.render(rw, http.StatusOK, "triage", title, webTriage{triageOut: out, Cost: cost}, "")
		return
	case errors.Is(err, transport.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, errReadApart):
		code = http.StatusForbidden
	}
	w.render(rw, code, "triage", title, empty, w.errText(err))
}

// scanPartitions reads a set's queues as acemq triage does (scanSet),
// each message grouped with the partition it was read from.
func (w *webUI) scanPartitions(a *app, name string, set []string) (triageOut, error) {
	depths := make([]int, len(set))
	for i, q := range set {
		info, err := w.t.Inspect(a.ctx, q)
		if err != nil {
			return triageOut{}, err
		}
		depths[i] = info.Messages
	}
	return a.scanSet(w.t, name, set, depths, true, w.cfg.read, 120, 0, true)
}
