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
}

type peekOut struct {
	Queue    string   `json:"queue"`
	Depth    int      `json:"depth"` // ready messages when peek began
	Messages []peeked `json:"messages"`
}

// maxBodyText bounds a body printed as text; --json prints it whole.
const maxBodyText = 512

// peek lists the head of a queue and gives every message back: an operator
// reads the reasons before deciding what to replay.
func (a *app) peek(args []string) int {
	fs, asJSON, url := a.flags("peek", "--queue Q.dlq [--limit N] [--body] [--url URL]",
		`Lists the first messages of a queue (usually a .dlq or .parked one): id,
attempt, age and reason. It takes them with basic.get and gives all of them
back at the end, in their order: nothing is consumed. While it runs they are
unacked, and afterwards RabbitMQ marks them redelivered. On a quorum queue
(not the default for .dlq and .parked) what was looked at goes to the back
of the queue and counts as a delivery towards x-delivery-limit.

Example:
  acemq peek --queue orders.dlq --limit 20
`, true)
	queue := fs.String("queue", "", "the queue to look at, by its full name (orders.dlq)")
	limit := fs.Int("limit", 20, "show at most this many messages")
	body := fs.Bool("body", false, "show the bodies too")
	if code, done := a.parse(fs, args); done {
		return code
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
	out, err := a.look(t, *queue, *limit, *body)
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
	info, err := t.Inspect(a.ctx, queue)
	if err != nil {
		return peekOut{}, err
	}
	out := peekOut{Queue: queue, Depth: info.Messages, Messages: []peeked{}}
	now := clockOf(t)
	_, err = a.borrow(t, queue, limit, func(d transport.Delivery) {
		env := acemq.EnvelopeOf(d)
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
		out.Messages = append(out.Messages, p)
	})
	return out, err
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
	fmt.Fprintf(a.stdout, "%s: %d ready, showing the first %d (none consumed)\n", out.Queue, out.Depth, len(out.Messages))
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
		}
		return
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tATTEMPT\tAGE\tREASON")
	for _, m := range out.Messages {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", escape.String(m.ID), m.Attempt, m.Age, escape.String(orDash(m.Reason)))
	}
	_ = tw.Flush()
}

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
