package main

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/acemq/acemq"
)

// Partitioned queues in status, triage and the dashboard. A partitioned
// queue Q (acemq.QueueConfig.Partitions: N) is N queues Q.p0 .. Q.p{N-1},
// each a full queue with its own .dlq, .parked, rungs and breaker markers
// (docs/wire-contract.md, "Partitioned queues (v1)"). The broker knows
// nothing of the set: status reads it back from the names.

// partitionName reads a partition queue's name back: "orders.p2" is
// partition 2 of "orders". The index is decimal without a leading zero
// (orders.p02 is no partition), as acemq.PartitionName writes it; the
// root package's reader is unexported, and this is the same rule.
func partitionName(name string) (queue string, index int, ok bool) {
	i := strings.LastIndex(name, ".p")
	if i <= 0 {
		return "", 0, false
	}
	digits := name[i+2:]
	if digits == "" || len(digits) > 9 || (len(digits) > 1 && digits[0] == '0') || strings.Trim(digits, "0123456789") != "" {
		return "", 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return "", 0, false
	}
	return name[:i], n, true
}

// partition is one partition of a partitioned service: its own service
// (Q.pI with its .dlq, .parked, rungs and breakers) and its line's counts.
type partition struct {
	Index int `json:"index"`
	service
	Counts partitionCounts `json:"counts"`
}

// partitionCounts is a partition's line in status, or a partitioned
// queue's totals: the work queue's counts, and the messages in its .dlq,
// .parked and rungs. A count no queue gives (a passive declare gives no
// unacked) or one not sampled yet is absent.
type partitionCounts struct {
	Ready         *int     `json:"ready,omitempty"`
	Unacked       *int     `json:"unacked,omitempty"`
	DeadLettering *int     `json:"dead_lettering,omitempty"`
	Consumers     *int     `json:"consumers,omitempty"`
	DLQ           *int     `json:"dlq,omitempty"`      // messages in Q.pI.dlq
	Parked        *int     `json:"parked,omitempty"`   // in Q.pI.parked
	Retrying      *int     `json:"retrying,omitempty"` // on its rungs
	PublishRate   *float64 `json:"publish_per_second,omitempty"`
	DeliverRate   *float64 `json:"deliver_per_second,omitempty"`
	// Missing are the queues of the family that are not there.
	Missing []string `json:"missing,omitempty"`
	// NotSampledYet is how many of its queues the management API has not
	// sampled yet: their counts are unknown, not zero.
	NotSampledYet int `json:"not_sampled_yet,omitempty"`
	// ActiveConsumer is an ordered partition's single active consumer, by
	// its tag, as the management API reports it.
	ActiveConsumer string `json:"active_consumer,omitempty"`
}

// tally is one cell of a partition's line, or its column's total.
type tally struct {
	n         *int
	unsampled bool // a queue that gives it has not been sampled yet
	missing   bool // the queue that gives it is not there
	none      bool // no queue gives it (no rungs)
}

func (t tally) String() string {
	switch {
	case t.unsampled:
		return "?"
	case t.missing:
		return "missing"
	case t.none:
		return "-"
	}
	return count(t.n)
}

// plus adds u to a column's total: unknown when a partition's is, missing
// only when every partition's is.
func (t tally) plus(u tally, first bool) tally {
	if first {
		return u
	}
	return tally{n: plus(t.n, u.n), unsampled: t.unsampled || u.unsampled, missing: t.missing && u.missing, none: t.none && u.none}
}

// known is the count for JSON: nil when it is not known whole.
func (t tally) known() *int {
	if t.unsampled {
		return nil
	}
	return t.n
}

// partitionLine is a partition's cells, or the totals'.
type partitionLine struct {
	ready, unacked, deadLettering, consumers, dlq, parked, retrying tally
	publish, deliver                                                *float64
}

func (l partitionLine) counts() partitionCounts {
	return partitionCounts{Ready: l.ready.known(), Unacked: l.unacked.known(), DeadLettering: l.deadLettering.known(), Consumers: l.consumers.known(),
		DLQ: l.dlq.known(), Parked: l.parked.known(), Retrying: l.retrying.known(), PublishRate: l.publish, DeliverRate: l.deliver}
}

func (l partitionLine) plus(m partitionLine, first bool) partitionLine {
	return partitionLine{ready: l.ready.plus(m.ready, first), unacked: l.unacked.plus(m.unacked, first), deadLettering: l.deadLettering.plus(m.deadLettering, first),
		consumers: l.consumers.plus(m.consumers, first), dlq: l.dlq.plus(m.dlq, first), parked: l.parked.plus(m.parked, first), retrying: l.retrying.plus(m.retrying, first),
		publish: plusRate(l.publish, m.publish), deliver: plusRate(l.deliver, m.deliver)}
}

func plusRate(a, b *float64) *float64 {
	if b == nil {
		return a
	}
	r := *b
	if a != nil {
		r += *a
	}
	return &r
}

// lineOf is a partition's line, from its service's queues.
func lineOf(s service) partitionLine {
	var l partitionLine
	l.retrying.none = true
	field := func(q queueStat, n *int) tally {
		switch {
		case q.Missing:
			return tally{missing: true}
		case q.NotSampledYet:
			return tally{unsampled: true}
		}
		return tally{n: n}
	}
	for _, q := range s.Queues {
		switch q.Role {
		case roleWork:
			l.ready, l.unacked, l.deadLettering, l.consumers = field(q, q.Ready), field(q, q.Unacked), field(q, q.DeadLettering), field(q, q.Consumers)
			if q.NotSampledYet && q.Consumers != nil {
				l.consumers = tally{n: q.Consumers} // the API lists consumers before its first sample of the counts
			}
			l.publish, l.deliver = q.PublishRate, q.DeliverRate
		case roleDLQ:
			l.dlq = field(q, held(q))
		case roleParked:
			l.parked = field(q, held(q))
		case roleRung:
			t := field(q, held(q))
			if t.missing {
				continue
			}
			l.retrying = l.retrying.plus(t, l.retrying.none)
		}
	}
	return l
}

// held is how many messages a queue holds, by the best count its source
// gives: all of them (the management API), or the ready ones (a passive
// declare).
func held(q queueStat) *int {
	if q.Messages != nil {
		return q.Messages
	}
	return q.Ready
}

// foldPartitions turns the services of a partition set into one
// partitioned service. Q.p0 .. Q.p{n-1} are a set when each of the work
// queues is there, for n one more than the highest index of a work queue
// there, and at least one of them is a service (has a .dlq, .parked, rung
// or breaker beside it): a lone app.p1 with no app.p0, or app.p0 and
// app.p2 without app.p1, are queues of their own. A work queue of the set
// with no family of its own (among others, the queues that are not
// acemq's) joins it. A partition's family without its work queue
// (app.p3.dlq left behind when the count went from 4 to 3) stays a
// service of its own, shown with app.p3 missing.
func foldPartitions(services []service, others []queueStat) ([]service, []queueStat) {
	type member struct {
		service int // position in services, or -1
		other   int // position in others, or -1
	}
	sets := map[string]map[int]member{} // Q -> index -> where
	add := func(name string, m member) {
		base, idx, ok := partitionName(name)
		if !ok {
			return
		}
		if sets[base] == nil {
			sets[base] = map[int]member{}
		}
		sets[base][idx] = m
	}
	for i, s := range services {
		if s.Partitions == nil && slices.ContainsFunc(s.Queues, func(q queueStat) bool { return q.Role == roleWork && !q.Missing }) {
			add(s.Queue, member{service: i, other: -1})
		}
	}
	for i, q := range others {
		add(q.Name, member{service: -1, other: i})
	}
	folded, pulled := map[int]bool{}, map[int]bool{}
	var out []service
	for base, members := range sets {
		n := 0
		for idx := range members {
			n = max(n, idx+1)
		}
		if len(members) != n || !slices.ContainsFunc(slices.Collect(maps.Values(members)), func(m member) bool { return m.service >= 0 }) {
			continue // a gap, or no service among them: not a set
		}
		ps := service{Queue: base, Partitions: make([]partition, n)}
		var total partitionLine
		var totals partitionCounts
		for idx := range n {
			var s service
			if m := members[idx]; m.service >= 0 {
				s = services[m.service]
				folded[m.service] = true
			} else {
				q := others[m.other]
				q.Role = roleWork
				s = service{Queue: q.Name, Queues: []queueStat{q}}
				pulled[m.other] = true
			}
			l := lineOf(s)
			p := partition{Index: idx, service: s, Counts: l.counts()}
			for _, q := range s.Queues {
				if q.Missing {
					p.Counts.Missing = append(p.Counts.Missing, q.Name)
				}
				if q.NotSampledYet {
					p.Counts.NotSampledYet++
				}
				if q.Role == roleWork {
					p.Counts.ActiveConsumer = q.ActiveConsumer
				}
			}
			totals.Missing = append(totals.Missing, p.Counts.Missing...)
			totals.NotSampledYet += p.Counts.NotSampledYet
			ps.Partitions[idx] = p
			total = total.plus(l, idx == 0)
		}
		t := total.counts()
		t.Missing, t.NotSampledYet = totals.Missing, totals.NotSampledYet
		ps.Totals = &t
		out = append(out, ps)
	}
	for i, s := range services {
		if !folded[i] {
			out = append(out, s)
		}
	}
	var rest []queueStat
	for i, q := range others {
		if !pulled[i] {
			rest = append(rest, q)
		}
	}
	return out, rest
}

// sortServices orders services by queue, a partitioned queue after a
// plain one of the same name (orders still draining beside orders.p0 ..
// orders.p3 after a move to partitions).
func sortServices(services []service) {
	slices.SortFunc(services, func(a, b service) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), cmp.Compare(len(a.Partitions), len(b.Partitions)))
	})
}

// serviceHas reports whether s is the service of the queue named (its
// owner by classify), or, partitioned, has it among its partitions.
func serviceHas(s service, name string) bool {
	owner, _, _ := classify(name)
	if owner == s.Queue {
		return true
	}
	return slices.ContainsFunc(s.Partitions, func(p partition) bool { return p.Queue == owner })
}

// partitionsLabel is a partitioned service's name as its line shows it:
// "orders (4 partitions)", and ordered when its partitions are.
func partitionsLabel(s service) string {
	label := s.Queue + " (" + plural(len(s.Partitions), "partition")
	if slices.ContainsFunc(s.Partitions, func(p partition) bool { return p.ordered() }) {
		label += ", ordered"
	}
	return label + ")"
}

// work is the partition's work queue.
func (p partition) work() queueStat {
	for _, q := range p.Queues {
		if q.Role == roleWork {
			return q
		}
	}
	return queueStat{Name: p.Queue, Role: roleWork, Missing: true}
}

// ordered: its work queue was declared with single active consumer.
func (p partition) ordered() bool { return p.work().SingleActiveConsumer }

// partitionState is the states of a set's work queues, said once:
// "running", or "2 running, 1 idle".
func partitionState(s service) string {
	var states []string
	n := map[string]int{}
	for _, p := range s.Partitions {
		w := p.work()
		st := w.State
		if w.Missing {
			st = "missing"
		}
		if st == "" {
			continue
		}
		if n[st] == 0 {
			states = append(states, st)
		}
		n[st]++
	}
	if len(states) == 1 && n[states[0]] == len(s.Partitions) {
		return states[0]
	}
	parts := make([]string, len(states))
	for i, st := range states {
		parts[i] = strconv.Itoa(n[st]) + " " + st
	}
	return strings.Join(parts, ", ")
}

// partitionNodes is where a set's partitions are: one node's name, or how
// many nodes.
func partitionNodes(s service) string {
	var nodes []string
	for _, p := range s.Partitions {
		if n := p.work().Node; n != "" && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	switch len(nodes) {
	case 0:
		return "-"
	case 1:
		return nodes[0]
	}
	return plural(len(nodes), "node")
}

// idlePartitions are the partitions of s with no consumer while another
// of s has one: their messages wait while the others' are served.
func idlePartitions(s service) []string {
	var idle []string
	served := false
	for _, p := range s.Partitions {
		w := p.work()
		switch {
		case w.Missing || w.Consumers == nil:
		case *w.Consumers > 0:
			served = true
		default:
			idle = append(idle, p.Queue)
		}
	}
	if !served {
		return nil
	}
	return idle
}

// maxPartitions bounds how far a passive declare looks for partitions.
const maxPartitions = 4096

// lookPartitions looks, for each work queue named and not there, at its
// partitions by passive declare: Q.p0, Q.p1, ... up to the first that is
// not there, each with its .dlq and .parked. A partitioned queue found so
// is no queue of its own: Q, Q.dlq and Q.parked are then not said missing
// (those there stay). look appends what it finds to stats.
func lookPartitions(stats *[]queueStat, look func(string) (bool, error)) error {
	missing := map[string]bool{}
	var works []string
	for _, q := range *stats {
		if q.Missing {
			missing[q.Name] = true
			if _, role, _ := classify(q.Name); role == roleWork {
				works = append(works, q.Name)
			}
		}
	}
	drop := map[string]bool{}
	for _, q := range works {
		for i := 0; i < maxPartitions; i++ {
			p := acemq.PartitionName(q, i)
			there, err := look(p)
			if err != nil {
				return err
			}
			if !there {
				drop[p] = true
				break
			}
			for _, n := range []string{acemq.DeadLetterQueue(p), acemq.ParkedQueue(p)} {
				if _, err := look(n); err != nil {
					return err
				}
			}
			if i == 0 {
				for _, n := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
					drop[n] = missing[n]
				}
			}
		}
	}
	*stats = slices.DeleteFunc(*stats, func(q queueStat) bool { return q.Missing && drop[q.Name] })
	return nil
}
