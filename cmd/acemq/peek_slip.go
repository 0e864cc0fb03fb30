package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/internal/redact"
	"github.com/acemq/acemq/slip"
)

// peekedSlip is a routing slip as peek --json shows it: the document as
// slip.Read read it (whole: records and variables are not cut), where
// the slip stands, and the event it is, if it is one. A slip that cannot
// be read has Error instead of Document; the header itself is in the
// message's headers.
type peekedSlip struct {
	Document *slip.Document `json:"document,omitempty"`
	Position *slipPosition  `json:"position,omitempty"`
	// Event is the message's x-acemq-slip-event: completed, faulted or
	// half-compensated, for an event.
	Event string `json:"event,omitempty"`
	Error string `json:"error,omitempty"`
}

// slipPosition is where a slip stands, summed up for a reader of JSON
// who would otherwise count the lists.
type slipPosition struct {
	Summary string `json:"summary"` // as peek prints it, "at stop 2 of 3: card.charge"
	// Stop is the stop the slip is at while running (the itinerary's
	// first), Step its number from 1, Steps the stops in all (visited and
	// ahead).
	Stop  string `json:"stop,omitempty"`
	Step  int    `json:"step,omitempty"`
	Steps int    `json:"steps"`
	// NextCompensation is the queue of the compensation that runs next
	// while compensating (the last registered);
	// Compensations the ones still to run, Compensated those run.
	NextCompensation string `json:"next_compensation,omitempty"`
	Compensations    int    `json:"compensations"`
	Compensated      int    `json:"compensated"`
}

// readSlip is the slip of a message's headers for peek, or nil when it
// carries none.
func readSlip(headers map[string]any) *peekedSlip {
	d, err := slip.Read(headers)
	if errors.Is(err, slip.ErrNotASlip) {
		return nil
	}
	ps := &peekedSlip{Event: headerText(headers[slip.EventHeader])}
	if err != nil {
		ps.Error = err.Error()
		return ps
	}
	ps.Document = d
	pos := positionOf(d)
	ps.Position = &pos
	return ps
}

// headerText is a string header's value (a long string arrives as a
// string from amqp091-go, as bytes from some other clients), else "".
func headerText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// positionOf sums up where d stands.
func positionOf(d *slip.Document) slipPosition {
	p := slipPosition{Steps: len(d.Visited) + len(d.Itinerary), Compensations: len(d.Compensations), Compensated: len(d.Compensated)}
	if n := len(d.Compensations); n > 0 {
		p.NextCompensation = d.Compensations[n-1].Queue
	}
	switch d.State {
	case slip.StateRunning:
		if len(d.Itinerary) == 0 {
			p.Summary = fmt.Sprintf("running, with no stop left (%d visited)", len(d.Visited))
			break
		}
		p.Stop, p.Step = d.Itinerary[0], len(d.Visited)+1
		p.Summary = fmt.Sprintf("at stop %d of %d: %s", p.Step, p.Steps, p.Stop)
	case slip.StateCompensating:
		if p.NextCompensation == "" {
			p.Summary = fmt.Sprintf("compensating: none left to run (%d run), the faulted event is next", p.Compensated)
			break
		}
		p.Summary = fmt.Sprintf("compensating: next %s (%d run, %d to run)", p.NextCompensation, p.Compensated, p.Compensations)
	case slip.StateCompleted:
		p.Summary = fmt.Sprintf("completed: %d stops visited", len(d.Visited))
	case slip.StateFaulted:
		p.Summary = fmt.Sprintf("faulted: %d compensations run", p.Compensated)
		if d.Fault != nil {
			p.Summary = fmt.Sprintf("faulted at %s: %d compensations run", d.Fault.Stop, p.Compensated)
		}
	case slip.StateHalfCompensated:
		p.Summary = fmt.Sprintf("half-compensated: %d compensations run, %d not", p.Compensated, p.Compensations)
		if d.Fault != nil && d.Fault.Compensation != "" {
			p.Summary = fmt.Sprintf("half-compensated: compensation %s failed (%d run, %d not)", d.Fault.Compensation, p.Compensated, p.Compensations)
		}
	default:
		p.Summary = fmt.Sprintf("state %q, which this acemq does not know", d.State)
	}
	return p
}

// slipView is a slip as a person reads it, on the terminal (printSlip)
// and on the dashboard's message page: every string from the slip
// escaped (escape.String, escape.JSON) and redacted, long JSON values
// cut with a note of how much was.
type slipView struct {
	Title string // "slip ID (name)"
	Error string // why it cannot be read; then there are no rows
	Rows  []slipRow
}

// slipRow is a label and its lines (one for most, one per item of a
// list).
type slipRow struct {
	Label string
	Lines []string
}

// maxSlipValue bounds a record, a compensation's arguments and the
// variables as the terminal and the page show them; --json has them
// whole.
const maxSlipValue = 240

// viewSlip is ps for a person; hide redacts what it is given (escaped
// text) of the URL in use and other secrets of the command line, after
// the passwords of URLs in the slip's own text are hidden.
func viewSlip(ps *peekedSlip, hide func(string) string) *slipView {
	text := func(s string) string { return hide(escape.String(redact.URLsIn(s))) }
	value := func(raw json.RawMessage) string { return hide(jsonValueText(raw, maxSlipValue)) }
	when := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000Z") }
	if ps.Document == nil {
		return &slipView{Title: "slip", Error: text(ps.Error)}
	}
	d := ps.Document
	v := &slipView{Title: "slip " + text(d.ID)}
	if d.Name != "" {
		v.Title += " (" + text(d.Name) + ")"
	}
	add := func(label string, lines ...string) {
		if len(lines) == 0 {
			lines = []string{"-"}
		}
		v.Rows = append(v.Rows, slipRow{Label: label, Lines: lines})
	}
	if ps.Event != "" {
		add("event", text(ps.Event))
	}
	add("state", text(d.State))
	add("where", text(ps.Position.Summary))
	var ahead []string
	if len(d.Itinerary) > 0 {
		stops := make([]string, len(d.Itinerary))
		for i, s := range d.Itinerary {
			stops[i] = text(s)
		}
		ahead = []string{strings.Join(stops, " → ")}
	}
	add("itinerary", ahead...)
	var visited []string
	for i, s := range d.Visited {
		line := fmt.Sprintf("%d. %s at %s", i+1, text(s.Stop), when(s.At))
		if len(s.Record) > 0 {
			line += ": " + value(s.Record)
		}
		visited = append(visited, line)
	}
	add("visited", visited...)
	if len(d.Variables) > 0 {
		var vars bytes.Buffer
		enc := json.NewEncoder(&vars)
		enc.SetEscapeHTML(false)                        // a page escapes for HTML itself; a terminal shows < as it is
		if err := enc.Encode(d.Variables); err != nil { // values json.Unmarshal read: it cannot fail
			add("variables", text(err.Error()))
		} else {
			add("variables", value(vars.Bytes()))
		}
	} else {
		add("variables")
	}
	var comps []string
	for i := len(d.Compensations) - 1; i >= 0; i-- {
		c := d.Compensations[i]
		line := fmt.Sprintf("%s (registered by %s)", text(c.Queue), text(c.Stop))
		if len(c.Args) > 0 {
			line += ": " + value(c.Args)
		}
		comps = append(comps, line)
	}
	label := "compensations"
	if len(comps) > 1 {
		label = "compensations, in the order they run (the last registered first)"
	}
	add(label, comps...)
	var done []string
	for _, c := range d.Compensated {
		done = append(done, fmt.Sprintf("%s (for %s) at %s", text(c.Queue), text(c.Stop), when(c.At)))
	}
	add("compensated", done...)
	if f := d.Fault; f != nil {
		lines := []string{fmt.Sprintf("at %s, %s: %s", text(f.Stop), when(f.At), text(f.Reason))}
		if f.Compensation != "" {
			lines = append(lines, fmt.Sprintf("and compensation %s failed for good: %s", text(f.Compensation), text(f.CompensationReason)))
		}
		add("fault", lines...)
	}
	var events []string
	if d.Completed != nil {
		events = append(events, "completed to "+text(d.Completed.String()))
	}
	if d.Faulted != nil {
		events = append(events, "faulted to "+text(d.Faulted.String()))
	}
	if len(events) > 0 {
		add("events go", strings.Join(events, ", "))
	}
	return v
}

// jsonValueText is a JSON value of a slip on one line: compact, with
// every rune a terminal would act on written as a JSON \u escape
// (escape.JSON), passwords of URLs hidden, and cut to max bytes with a
// note of how many were cut.
func jsonValueText(raw json.RawMessage, max int) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil { // not JSON: cannot come from slip.Read, shown as text
		return escape.Cut(redact.URLsIn(string(raw)), max)
	}
	s := redact.URLsIn(string(escape.JSON(buf.Bytes())))
	if !escape.IsSafe(s) { // escape.JSON leaves a newline as it is; compact JSON holds none
		s = escape.String(s)
	}
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)-cut) + " more bytes; --json has it whole)"
}

// printSlip writes v for the terminal under the message whose id it is,
// indented, one line a row and a line more for each further item.
func printSlip(w io.Writer, id string, v *slipView) {
	if v.Error != "" {
		fmt.Fprintf(w, "  %s of %s cannot be read: %s\n", v.Title, id, v.Error)
		return
	}
	fmt.Fprintf(w, "  %s of %s\n", v.Title, id)
	width := 0
	for _, r := range v.Rows {
		if len(r.Lines) == 1 && len(r.Label) > width {
			width = len(r.Label)
		}
	}
	for _, r := range v.Rows {
		if len(r.Lines) == 1 {
			fmt.Fprintf(w, "    %-*s  %s\n", width+1, r.Label+":", r.Lines[0])
			continue
		}
		fmt.Fprintf(w, "    %s:\n", r.Label)
		for _, l := range r.Lines {
			fmt.Fprintf(w, "      %s\n", l)
		}
	}
}
