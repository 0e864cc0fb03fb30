package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/slip"
	"github.com/acemq/acemq/transport"
)

// Result is what the example saw: the events read from orders.slips, the
// dead letters of the stops, and the shop's journal and books.
type Result struct {
	Events      []Event             // by slip id
	DeadLetters []DeadLetter        // by queue
	Journal     map[string][]string // what the stops did, by slip id
	Duplicates  []string            // hop ids run once though delivered twice
	Held        []string            // reservations not released
	Kept        []string            // payments not refunded
}

// Event is one completed or faulted event: its x-acemq-slip-event, its
// x-acemq-id and the slip's final document.
type Event struct {
	Kind, HopID string
	Slip        *slip.Document
}

// DeadLetter is a message in a stop's .dlq, with the slip it carries.
type DeadLetter struct {
	Queue, Reason string
	Slip          *slip.Document
}

// collect reads (and takes) the events and dead letters, once the server
// has stopped.
func collect(ctx context.Context, t transport.Transport, sh *Shop) (*Result, error) {
	res := &Result{}
	err := drain(ctx, t, Events, func(d transport.Delivery) error {
		doc, err := slip.Read(d.Headers)
		if err != nil {
			return fmt.Errorf("an event in %s without a readable slip: %w", Events, err)
		}
		kind, _ := d.Headers[slip.EventHeader].(string)
		res.Events = append(res.Events, Event{Kind: kind, HopID: acemq.EnvelopeOf(d).ID, Slip: doc})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(res.Events, func(a, b Event) int { return strings.Compare(a.Slip.ID, b.Slip.ID) })
	for _, q := range append(append([]string(nil), Stops...), Release, Refund) {
		err := drain(ctx, t, acemq.DeadLetterQueue(q), func(d transport.Delivery) error {
			doc, err := slip.Read(d.Headers)
			if err != nil {
				return fmt.Errorf("a dead letter in %s without a readable slip: %w", acemq.DeadLetterQueue(q), err)
			}
			res.DeadLetters = append(res.DeadLetters, DeadLetter{Queue: acemq.DeadLetterQueue(q), Reason: acemq.EnvelopeOf(d).Error, Slip: doc})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	res.Journal = maps.Clone(sh.journal)
	res.Duplicates = slices.Clone(sh.dups)
	res.Held = slices.Sorted(maps.Keys(sh.held))
	res.Kept = slices.Sorted(maps.Keys(sh.kept))
	return res, nil
}

// print tells each slip's story: what its stops did, then its event. What
// came from a message (records, variables, reasons) is escaped before the
// terminal sees it.
func (r *Result) print(out io.Writer) {
	for _, e := range r.Events {
		doc := e.Slip
		fmt.Fprintf(out, "\n%s: %s", escape.String(doc.ID), escape.String(e.Kind))
		if doc.Fault != nil {
			fmt.Fprintf(out, " at %s: %s", escape.String(doc.Fault.Stop), escape.String(doc.Fault.Reason))
		}
		fmt.Fprintf(out, " (event %s)\n", escape.String(e.HopID))
		for _, line := range r.Journal[doc.ID] {
			fmt.Fprintf(out, "  %s\n", line)
		}
		for i, v := range doc.Visited {
			label := "visited:"
			if i > 0 {
				label = ""
			}
			fmt.Fprintf(out, "  %-12s %-14s %s\n", label, escape.String(v.Stop), escape.Bytes(v.Record))
		}
		vars, _ := json.Marshal(doc.Variables) // keys sorted
		fmt.Fprintf(out, "  %-12s %s\n", "variables:", escape.Bytes(vars))
		fmt.Fprintf(out, "  %-12s %s\n", "compensated:", compensated(doc))
	}
	fmt.Fprintln(out)
	for _, d := range r.DeadLetters {
		fmt.Fprintf(out, "%s: %s, its slip %s: %s\n", d.Queue, escape.String(d.Slip.ID), escape.String(d.Slip.State), escape.String(d.Reason))
	}
	fmt.Fprintf(out, "duplicate hops run once: %s\n", list(r.Duplicates))
	fmt.Fprintf(out, "stock still reserved: %s\n", list(r.Held))
	fmt.Fprintf(out, "payments kept: %s\n", list(r.Kept))
}

// compensated says which compensations ran, in the order they ran.
func compensated(doc *slip.Document) string {
	if len(doc.Compensated) == 0 {
		return "nothing"
	}
	var parts []string
	for _, c := range doc.Compensated {
		parts = append(parts, fmt.Sprintf("%s (for %s)", escape.String(c.Queue), escape.String(c.Stop)))
	}
	return strings.Join(parts, ", then ")
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	var out []string
	for _, x := range xs {
		out = append(out, escape.String(x))
	}
	return strings.Join(out, ", ")
}
