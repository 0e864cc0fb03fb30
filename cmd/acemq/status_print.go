package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/escape"
)

// How acemq status prints what it gathered (status.go): the table, its
// notes, and the counts as an operator reads them.

func (a *app) printStatus(out statusOut, asJSON bool) int {
	if out.Services == nil {
		out.Services = []service{}
	}
	if asJSON {
		a.printJSON(out)
		return exitOK
	}
	fmt.Fprintf(a.stdout, "vhost %s, from the %s", out.Vhost, out.Source)
	if out.ManagementError == "" {
		fmt.Fprintf(a.stdout, " at %s", out.Management)
	}
	fmt.Fprintf(a.stdout, ": %s", plural(len(out.Services), "service"))
	if len(out.Other) > 0 {
		fmt.Fprintf(a.stdout, ", %s not acemq's", plural(len(out.Other), "other queue"))
	}
	if n := breakerCount(out.Services); n > 0 {
		fmt.Fprintf(a.stdout, ", %s not closed", plural(n, "circuit breaker"))
	}
	fmt.Fprintln(a.stdout)
	var notes statusNotes
	plain := slices.DeleteFunc(slices.Clone(out.Services), func(s service) bool { return s.Partitions != nil })
	if len(plain) > 0 || len(out.Delays) > 0 {
		a.printQueues(plain, out.Delays, &notes)
	}
	if len(plain) < len(out.Services) {
		if len(plain) > 0 || len(out.Delays) > 0 {
			fmt.Fprintln(a.stdout)
		}
		a.printPartitions(out.Services, &notes)
	}
	notes.print(a, out)
	return exitOK
}

// printQueues is status's table of services that are not partitioned,
// and the delay queues.
func (a *app) printQueues(services []service, delays []queueStat, notes *statusNotes) {
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tMESSAGES\tREADY\tUNACKED\tDEAD-LETTERING\tCONSUMERS\tIN/S\tOUT/S\tSTATE")
	row := func(indent string, q queueStat) {
		notes.add(q)
		switch {
		case q.Missing:
			fmt.Fprintf(tw, "%s%s\t-\t-\t-\t-\t-\t-\t-\tmissing\n", indent, escape.String(q.Name))
		case q.NotSampledYet:
			fmt.Fprintf(tw, "%s%s\t%s\t\t\t\t%s\t%s\t%s\t%s\n", indent, escape.String(q.Name), notSampledYet,
				count(q.Consumers), rate(q.PublishRate), rate(q.DeliverRate), q.State)
		default:
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", indent, escape.String(q.Name), count(q.Messages), count(q.Ready), count(q.Unacked),
				count(q.DeadLettering), count(q.Consumers), rate(q.PublishRate), rate(q.DeliverRate), q.State)
		}
	}
	for _, s := range services {
		for i, q := range s.Queues {
			indent := "  "
			if i == 0 {
				indent = ""
			}
			row(indent, q)
		}
		for _, m := range s.Breakers {
			// a row of the table, so that the columns stay aligned; the
			// text in its last column, which sets no width
			fmt.Fprintf(tw, "  breaker %s\t\t\t\t\t\t\t\t%s\n", escape.String(orDash(m.Instance)), breakerText(a.now(), m))
			notes.breakers = appendNew(notes.breakers, escape.String(s.Queue))
		}
	}
	if len(delays) > 0 {
		t := delayTotal(delays)
		state := plural(t.levels, "level")
		if t.unsampled > 0 {
			state += fmt.Sprintf(", %d %s", t.unsampled, notSampledYet)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t-\t-\t-\t%s\n", delay.Prefix+".*", count(t.Messages), count(t.Ready), count(t.Unacked), count(t.DeadLettering), state)
		for _, q := range delays {
			if q.Role == roleUndeliverable || q.Missing || q.NotSampledYet || waiting(q) {
				row("  ", q)
			}
		}
	}
	_ = tw.Flush()
}

func (n *statusNotes) print(a *app, out statusOut) {
	if len(n.idle) > 0 {
		fmt.Fprintf(a.stdout, "\nNo consumer on %s, while other partitions of %s have one: the messages there wait while the rest are served. "+
			"A server consumes every partition of the queue it serves, so this one lost its consumer (its channel closed: see the server's log).\n",
			strings.Join(n.idle, ", "), strings.Join(n.idleOf, ", "))
	}
	if len(n.breakers) > 0 {
		fmt.Fprintf(a.stdout, "\nA circuit breaker is not closed on %s: the handlers' dependency is failing, so their consumers stopped taking messages, "+
			"which wait ready in the queue and spend no attempt; nothing to fix in the broker.\n",
			strings.Join(n.breakers, ", "))
	}
	if len(n.deadLettering) > 0 {
		fmt.Fprintf(a.stdout, "\n%s waiting to be dead-lettered on %s: their dead-letter target was full or missing, so the queue keeps them, "+
			"neither ready nor unacked, and RabbitMQ offers them again about every 3 minutes. Never delete a queue that is not empty by every count.\n",
			plural(n.held, "message"), strings.Join(n.deadLettering, ", "))
	}
	if n.unsampled > 0 {
		where := ""
		if n.unsampledPartitions {
			where = " (? in the partitioned queues' table)"
		}
		fmt.Fprintf(a.stdout, "\n%s %s%s: the management API lists a queue at once and samples its counts every few seconds (collect_statistics_interval); run status again.\n",
			plural(n.unsampled, "queue"), notSampledYet, where)
	}
	if out.Unseen != "" {
		fmt.Fprintf(a.stdout, "\n%s.\n", out.Unseen)
	}
}

// breakerCount is how many breakers the services have not closed.
func breakerCount(services []service) int {
	n := 0
	for _, s := range services {
		n += len(s.Breakers)
		for _, p := range s.Partitions {
			n += len(p.Breakers) // a partition's breakers are its own
		}
	}
	return n
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// waiting reports whether a delay level holds messages, as far as the
// source says.
func waiting(q queueStat) bool {
	for _, n := range []*int{q.Messages, q.Ready, q.Unacked, q.DeadLettering} {
		if n != nil && *n > 0 {
			return true
		}
	}
	return false
}

func plus(a, b *int) *int {
	if b == nil {
		return a
	}
	n := *b
	if a != nil {
		n += *a
	}
	return &n
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func count(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}

func rate(r *float64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatFloat(*r, 'f', 1, 64)
}
