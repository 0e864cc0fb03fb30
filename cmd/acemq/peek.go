package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// peeked is one message as peek shows it.
type peeked struct {
	ID          string     `json:"id"`
	Attempt     int        `json:"attempt"`
	Age         string     `json:"age"`
	Created     *time.Time `json:"created,omitempty"` // absent when the message carries no creation time
	Reason      string     `json:"reason"`
	Exchange    string     `json:"exchange"`
	RoutingKey  string     `json:"routing_key"`
	Redelivered bool       `json:"redelivered"`
	Bytes       int        `json:"bytes"`
	Body        *string    `json:"body,omitempty"`
	// DeadLettered is when the broker dead-lettered the message (the time
	// of x-death's newest entry); absent for one acemq moved itself,
	// whose copy keeps the message's own timestamp.
	DeadLettered *time.Time     `json:"dead_lettered,omitempty"`
	Headers      map[string]any `json:"headers"` // all of them, as the wire has them (byte arrays as text)
	// Slip is the routing slip the message carries (x-acemq-slip), read;
	// absent for a message without one.
	Slip *peekedSlip `json:"slip,omitempty"`
}

type peekOut struct {
	Queue    string   `json:"queue"`
	Depth    int      `json:"depth"` // ready messages when peek began
	Messages []peeked `json:"messages"`
	// With a filter (--match, --match-body, --id): how many were read,
	// and how many of them it matches, which a replay with the same
	// filter would move.
	Read    *int `json:"read,omitempty"`
	Matched *int `json:"matched,omitempty"`
}

// maxBodyText bounds a body printed as text; --json prints it whole.
const maxBodyText = 512

// peek lists the head of a queue and gives every message back: an operator
// reads the reasons before deciding what to replay.
func (a *app) peek(args []string) int {
	fs, asJSON, url := a.flags("peek", "--queue Q.dlq [--limit N] [--body] [--match REGEX] [--match-body REGEX] [--id ID] [--url URL]",
		`Lists the first messages of a queue (usually a .dlq or .parked one): id,
attempt, age and reason. It takes them with basic.get and gives all of them
back at the end, in their order: nothing is consumed. While it runs they are
unacked, and afterwards RabbitMQ marks them redelivered. On a quorum queue
(not the default for .dlq and .parked) what was looked at goes to the back
of the queue and counts as a delivery towards x-delivery-limit.

Before it reads, it asks the management API what a read costs: a .dlq,
.parked or archive queue without a delivery limit is read at once; any
other queue is read after a note on stderr saying the cost, and one whose
delivery limit a read counts against (or, not set aside, whose limit
cannot be told) is refused unless --spend-deliveries is given.

It reads on a connection of its own: a message this client cannot read
(headers nested deeper than 32, or over 8192 entries) closes that
connection alone, and the error says how to remove it.

With --match, --match-body or --id (replay's filters) it is a dry run of a
replay: it reads the whole queue (up to --scan messages), lists up to --limit
of those the filter matches, and says how many a replay with it would move.

Example:
  acemq peek --queue orders.dlq --limit 20
  acemq peek --queue orders.dlq --match warehouse
`, true)
	queue := fs.String("queue", "", "the queue to look at, by its full name (orders.dlq)")
	limit := fs.Int("limit", 20, "show at most this many messages")
	body := fs.Bool("body", false, "show the bodies too")
	match := fs.String("match", "", "show only messages whose reason (x-acemq-error) matches this regular expression, as replay --match moves them")
	matchBody := fs.String("match-body", "", "show only messages whose body matches this regular expression")
	var ids listFlag
	fs.Var(&ids, "id", "show only the message with this x-acemq-id (repeatable)")
	scan := fs.Int("scan", 10000, "with a filter, read at most this many messages")
	management, spend := readFlags(fs)
	if code, done := a.parse(fs, args); done {
		return code
	}
	filter, err := replayFilter(*match, *matchBody, ids)
	if err != nil {
		return a.usageError(fs, "%v", err)
	}
	if *scan < 1 {
		return a.usageError(fs, "--scan must be at least 1")
	}
	if *queue == "" {
		return a.usageError(fs, "--queue is required")
	}
	if *limit < 1 {
		return a.usageError(fs, "--limit must be at least 1")
	}
	t, code := a.connect(fs, *url)
	if t == nil {
		return code
	}
	defer t.Close()
	if code, ok := a.mayRead(fs, t, *management, *spend, *queue); !ok {
		return code
	}
	r, closeRead, code := a.openReadPath(fs, t)
	if r == nil {
		return code
	}
	defer closeRead()
	var out peekOut
	if filter == nil {
		out, err = a.look(r, *queue, *limit, *body)
	} else {
		out, err = a.lookFor(r, *queue, *scan, *limit, *body, filter)
	}
	if err != nil && isUnreadable(err) && len(out.Messages) > 0 {
		a.printPeek(out, *body) // what was read before it, then why the rest cannot be
	}
	if err != nil {
		return a.fail(fs, err)
	}
	if *asJSON {
		a.printJSON(out)
		return exitOK
	}
	a.printPeek(out, *body)
	return exitOK
}

// look takes up to limit messages, reads them, and gives them all back.
func (a *app) look(t transport.Transport, queue string, limit int, withBody bool) (peekOut, error) {
	return a.lookFor(t, queue, limit, limit, withBody, nil)
}

// lookFor takes up to scan messages and gives them all back; it lists up
// to limit of those filter matches (all when it is nil) and, with a
// filter, counts what it read and matched.
func (a *app) lookFor(t transport.Transport, queue string, scan, limit int, withBody bool, filter func(acemq.Envelope, []byte) bool) (peekOut, error) {
	info, err := t.Inspect(a.ctx, queue)
	if err != nil {
		return peekOut{}, err
	}
	out := peekOut{Queue: queue, Depth: info.Messages, Messages: []peeked{}}
	now := clockOf(t)
	matched := 0
	read, err := a.borrow(t, queue, scan, func(d transport.Delivery) {
		env := acemq.EnvelopeOf(d)
		if filter != nil && !filter(env, d.Body) {
			return
		}
		if matched++; len(out.Messages) >= limit {
			return
		}
		p := peeked{ID: orDash(env.ID), Attempt: env.Attempt, Age: "-",
			Reason: env.Error, Exchange: env.Exchange, RoutingKey: env.RoutingKey, Redelivered: d.Redelivered, Bytes: len(d.Body)}
		if !env.CreatedAt.IsZero() {
			created := env.CreatedAt.UTC()
			p.Created, p.Age = &created, age(now().Sub(created))
		}
		if withBody {
			s := printable(d.Body)
			p.Body = &s
		}
		if at := deadLettered(d.Headers); !at.IsZero() {
			at = at.UTC()
			p.DeadLettered = &at
		}
		p.Headers = jsonHeaders(d.Headers)
		p.Slip = readSlip(d.Headers)
		out.Messages = append(out.Messages, p)
	})
	if filter != nil {
		out.Read, out.Matched = &read, &matched
	}
	return out, err
}

// jsonHeaders is h for JSON: byte arrays (AMQP's byte and long strings
// from some clients) as text rather than base64, in tables and arrays too.
func jsonHeaders(h map[string]any) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		out[k] = jsonValue(v)
	}
	return out
}

func jsonValue(v any) any {
	switch v := v.(type) {
	case []byte:
		return printable(v)
	case map[string]any:
		return jsonHeaders(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = jsonValue(e)
		}
		return out
	default:
		return v
	}
}

// borrow takes up to limit messages from the head of queue (basic.get),
// shows each to read as it comes, and gives them all back when it
// returns, in the order taken, whatever happened: nothing is consumed. It
// holds them all, unacknowledged, until the last is read, so that each
// is taken once: giving one back before taking the next would, on a
// queue that puts what it gets back at its head, take the same message
// again, and on one that puts it at its back, reorder the queue. It
// returns how many it took.
func (a *app) borrow(t transport.Transport, queue string, limit int, read func(transport.Delivery)) (int, error) {
	var held []transport.Delivery
	defer func() {
		for _, d := range held { // in the order taken: each goes back to its place
			_ = d.Reject(true)
		}
	}()
	for len(held) < limit {
		d, ok, err := t.Get(a.ctx, queue)
		if err != nil {
			return len(held), err
		}
		if !ok {
			break
		}
		held = append(held, d)
		read(d)
	}
	return len(held), nil
}

func (a *app) printPeek(out peekOut, withBody bool) {
	if out.Matched != nil {
		fmt.Fprintf(a.stdout, "%s: %d ready; of the %d read, %d match: a replay with this filter would move %d; showing %d (none consumed)\n",
			out.Queue, out.Depth, *out.Read, *out.Matched, *out.Matched, len(out.Messages))
	} else {
		fmt.Fprintf(a.stdout, "%s: %d ready, showing the first %d (none consumed)\n", out.Queue, out.Depth, len(out.Messages))
	}
	if len(out.Messages) == 0 {
		return
	}
	if withBody { // a record per message: bodies would break a table
		for _, m := range out.Messages {
			b := escape.String(*m.Body)
			if len(b) > maxBodyText {
				b = escape.Cut(*m.Body, maxBodyText) + " (" + strconv.Itoa(m.Bytes) + " bytes)"
			}
			fmt.Fprintf(a.stdout, "\n%s  attempt %d  age %s\n  reason: %s\n  body:   %s\n", escape.String(m.ID), m.Attempt, m.Age, escape.String(orDash(m.Reason)), b)
			if m.Slip != nil {
				printSlip(a.stdout, escape.String(m.ID), viewSlip(m.Slip, noHide))
			}
		}
		return
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tATTEMPT\tAGE\tREASON")
	for _, m := range out.Messages {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", escape.String(m.ID), m.Attempt, m.Age, escape.String(orDash(m.Reason)))
	}
	_ = tw.Flush()
	for _, m := range out.Messages { // the slips under the table, which they would break
		if m.Slip != nil {
			fmt.Fprintln(a.stdout)
			printSlip(a.stdout, escape.String(m.ID), viewSlip(m.Slip, noHide))
		}
	}
}

// noHide is viewSlip's hide for the terminal, whose output a.stdout
// redacts a line at a time.
func noHide(s string) string { return s }

// age writes how old a message is, to the second; days past two of them.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d >= 48*time.Hour {
		days := d / (24 * time.Hour)
		s := strconv.Itoa(int(days)) + "d"
		if h := (d - days*24*time.Hour).Truncate(time.Hour); h > 0 {
			s += retry.FormatDelay(h)
		}
		return s
	}
	return retry.FormatDelay(d.Truncate(time.Second))
}

// printable is the body as text, or quoted when it is not UTF-8.
func printable(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

// clockOf is the transport's clock (a memory broker's virtual one in
// tests), else the wall clock.
func clockOf(t transport.Transport) func() time.Time {
	if c, ok := t.(transport.Clocked); ok {
		return c.Clock().Now
	}
	return time.Now
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
