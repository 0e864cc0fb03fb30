package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/retry"
)

// How acemq delays prints what it gathered (delays.go): the levels, the
// destinations waiting on them, and their due times.

func (a *app) printDelays(out delaysOut) {
	on := amqpconn.Redact(a.url)
	if out.Broker != "" {
		on += " (" + out.Broker + ")"
	}
	a.printCounts(on, out)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	header := "LEVEL\tQUEUE\tWAIT\tREADY\tUNACKED\tDEAD-LETTERING"
	if out.Peek != nil {
		header += "\tPEEKED"
	}
	fmt.Fprintln(tw, header)
	unseen := "unknown"
	if out.ManagementError == "" {
		unseen = notSampledYet
	}
	row := func(level string, q delayQueueOut) {
		ready, unacked, dl := strconv.Itoa(q.Messages), seenCount(q.Unacked, unseen), seenCount(q.DeadLettering, unseen)
		if q.Missing {
			ready, unacked, dl = "missing", "-", "-"
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", level, q.Queue, orDash(q.Wait), ready, unacked, dl)
		if out.Peek != nil {
			peeked := "-"
			if q.Peeked != nil {
				peeked = strconv.Itoa(*q.Peeked)
			}
			line += "\t" + peeked
		}
		fmt.Fprintln(tw, line)
	}
	for _, q := range out.Levels {
		row(fmt.Sprintf("%02d", *q.Level), q)
	}
	row("-", out.Undeliverable)
	_ = tw.Flush()
	var consumed []string
	for _, q := range append(slices.Clip(out.Levels), out.Undeliverable) {
		if q.Consumers > 0 {
			consumed = append(consumed, fmt.Sprintf("%s (%d)", q.Queue, q.Consumers))
		}
	}
	a.printHeld(out)
	if len(consumed) > 0 {
		fmt.Fprintf(a.stdout, "\nwarning: consumers on %s: nothing should consume from the delay queues; a consumer there takes waiting messages before they are due\n", strings.Join(consumed, ", "))
	}
	if out.Undeliverable.Messages > 0 {
		fmt.Fprintf(a.stdout, "\n%d due, but their destination queue did not exist when they were due: they wait in %s, and a running server sends them round again every 10s\n",
			out.Undeliverable.Messages, delay.Undeliverable)
	}
	p := out.Peek
	if p == nil {
		return
	}
	fmt.Fprintf(a.stdout, "\npeeked %d (at most %d from each queue) and gave them all back: none consumed, but on a quorum queue each one's delivery count is now one higher\n", p.Peeked, p.PerQueue)
	if !p.Levels {
		fmt.Fprintf(a.stdout, "the level queues were not peeked: %s; only %s was\n", p.LevelsSkipped, delay.Undeliverable)
	}
	if p.MaxDeliveryCount >= countWarning {
		fmt.Fprintf(a.stdout, "warning: a peeked message had been delivered %d times before: RabbitMQ 4 dead-letters a quorum queue's message past its delivery limit (20 by default), which from a level queue delivers it early; peek less often\n", p.MaxDeliveryCount)
	}
	if p.Levels {
		a.printDestinations(out.Now, "waiting on the levels", p.Waiting)
	}
	a.printDestinations(out.Now, "in "+delay.Undeliverable, p.Undeliverable)
}

func (a *app) printDestinations(now time.Time, title string, list []destinationOut) {
	if len(list) == 0 {
		fmt.Fprintf(a.stdout, "\n%s: none peeked\n", title)
		return
	}
	fmt.Fprintf(a.stdout, "\n%s, by destination:\n", title)
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DESTINATION\tMESSAGES\tEARLIEST DUE\tLATEST DUE")
	for _, d := range list {
		name := "(not a delay routing key)"
		if d.Queue != "" {
			name = safeName(d.Queue)
		}
		messages := strconv.Itoa(d.Messages)
		if d.NoDue > 0 {
			messages += fmt.Sprintf(" (%d without x-acemq-due)", d.NoDue)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, messages, dueText(now, d.Earliest), dueText(now, d.Latest))
	}
	_ = tw.Flush()
}

// seenCount writes a count, or unseen when it could not be read.
func seenCount(n *int, unseen string) string {
	if n == nil {
		return unseen
	}
	return strconv.Itoa(*n)
}

// dueText writes a due time and how far it is from now: "2026-12-01
// 10:28:31.250Z (in 3m20s)", "... (5m ago)".
func dueText(now time.Time, at *time.Time) string {
	if at == nil {
		return "-"
	}
	d := at.Sub(now)
	if d.Abs() >= time.Second {
		d = d.Truncate(time.Second) // a due time is read to the second ahead, to the millisecond when it is near
	}
	rel := "now"
	switch {
	case d > 0:
		rel = "in " + span(d)
	case d < 0:
		rel = span(-d) + " ago"
	}
	return at.UTC().Format("2006-01-02 15:04:05.000Z07:00") + " (" + rel + ")"
}

// span writes a duration as rung names do (retry.FormatDelay), with days
// from two of them on: 125ms, 4m16s, 194d4h20m16s.
func span(d time.Duration) string {
	const day = 24 * time.Hour
	if d < 2*day {
		return retry.FormatDelay(d)
	}
	days := d / day
	s := strconv.FormatInt(int64(days), 10) + "d"
	if rest := d - days*day; rest > 0 {
		s += retry.FormatDelay(rest)
	}
	return s
}

// safeName is a queue name as it may be printed: as it is when every
// character is a visible one, else quoted with Go's escapes, so that a
// name from a routing key, which any client chooses, cannot move the
// cursor, recolour the terminal or pass for another name.
func safeName(s string) string {
	if s != "" && utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool {
		return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' || r == '\\'
	}) < 0 {
		return s
	}
	return strconv.Quote(s)
}
