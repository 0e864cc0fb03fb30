package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// readPath is the one way peek, triage and replay read a queue: its Gets
// run on a transport of their own, dialled for the read (a connection of
// its own on RabbitMQ), and everything else (Inspect, Declare, Publish) on
// the command's. A delivery amqp091-go cannot read (headers nested deeper
// than 32 or over 8192 entries) makes it close the connection it was read
// on, with every delivery taken on it: on a connection of its own, that
// kills the read alone, not the publishes of a replay or an archive, nor
// the inspections that count what is left. Such a Get returns an error
// that wraps rabbitmq.ErrUnreadable and says what the server's log says:
// how to get the delivery out of the way.
type readPath struct {
	transport.Transport                     // the command's
	gets                transport.Transport // reads only
}

// Get takes one message on the reading transport.
func (r readPath) Get(ctx context.Context, queue string) (transport.Delivery, bool, error) {
	d, ok, err := r.gets.Get(ctx, queue)
	if err != nil && rabbitmq.IsUnreadable(err) {
		return transport.Delivery{}, false, &unreadableError{queue: queue, err: err}
	}
	return d, ok, err
}

// clockedReadPath is a readPath over a transport with a clock of its own
// (the memory broker's, in tests), which acemq.Replay reads.
type clockedReadPath struct {
	readPath
	clock transport.Clock
}

func (c clockedReadPath) Clock() transport.Clock { return c.clock }

// unreadableError is a read stopped by a delivery amqp091-go cannot read.
type unreadableError struct {
	queue string
	err   error
}

func (e *unreadableError) Error() string {
	return "acemq: " + rabbitmq.UnreadableAdvice(escape.String(e.queue)) + " (amqp091-go: " + e.err.Error() + ")"
}

func (e *unreadableError) Unwrap() []error { return []error{rabbitmq.ErrUnreadable, e.err} }

// openReadPath dials the reading transport, to the broker connect dialled
// (a.url) with the TLS flags of fs, and returns the read path over t and
// the function that closes it. On failure it has printed why and returns
// the exit status.
func (a *app) openReadPath(fs *flag.FlagSet, t transport.Transport) (transport.Transport, func(), int) {
	cfg, err := a.tlsConfig(fs)
	if err != nil {
		return nil, nil, a.usageError(fs, "%v", err)
	}
	gets, err := a.dial(withTLS(a.ctx, cfg), a.url)
	if err != nil {
		return nil, nil, a.fail(fs, fmt.Errorf("connect to %s to read: %w", a.redact(a.url), err))
	}
	rp := readPath{Transport: t, gets: gets}
	closeIt := func() { _ = gets.Close() }
	if c, ok := t.(transport.Clocked); ok {
		return clockedReadPath{readPath: rp, clock: c.Clock()}, closeIt, exitOK
	}
	return rp, closeIt, exitOK
}

// isUnreadable reports whether err is a read stopped by a delivery this
// client cannot read.
func isUnreadable(err error) bool { return errors.Is(err, rabbitmq.ErrUnreadable) }

// readFlags adds to fs the flags of a command that reads a queue: the
// management API to ask what a read costs, and the operator's leave to
// spend a delivery budget.
func readFlags(fs *flag.FlagSet) (management *string, spend *bool) {
	management = fs.String("management", "", "the management API, http://host:15672, asked what a read costs (default: the broker's host, or $"+EnvManagement+")")
	spend = fs.Bool("spend-deliveries", false, "read a queue whose delivery limit a read counts against (or whose limit cannot be told), "+
		"spending one delivery of every message read: without it such a read is refused")
	return management, spend
}

// mayRead says what reading queue costs before it is read (readCost), and
// decides: a set-aside queue (.dlq, .parked, archive) without a delivery
// limit is read at once; one with a limit, and a work queue, rung or delay
// level with a limit or whose limit cannot be told, is refused unless spend
// (--spend-deliveries) says the operator accepts the cost; anything else is
// read after a note on stderr saying the cost. Refused or failed, it has
// printed why and returns false with the exit status.
func (a *app) mayRead(fs *flag.FlagSet, t transport.Transport, management string, spend bool, queue string) (int, bool) {
	mc, err := a.managementFor(fs, management)
	if err != nil {
		return a.usageError(fs, "%v", err), false
	}
	cost, err := a.readCost(a.ctx, t, mc, queue)
	if errors.Is(err, transport.ErrNotFound) {
		return a.fail(fs, err), false
	}
	risky := cost.SpendsBudget() || !cost.Known() && !cost.SetAside()
	switch {
	case cost.Free():
		return exitOK, true
	case risky && !spend:
		fmt.Fprintf(a.stderr, "%s: %s.\n", fs.Name(), cost)
		return a.fail(fs, fmt.Errorf("not read: a read gets every message it reads and gives it back, and on %s that may spend a delivery "+
			"of each; give --spend-deliveries to read it all the same", escape.String(queue))), false
	case risky:
		fmt.Fprintf(a.stderr, "%s: %s; reading it all the same (--spend-deliveries).\n", fs.Name(), cost)
	default:
		fmt.Fprintf(a.stderr, "%s: note: %s.\n", fs.Name(), cost)
	}
	return exitOK, true
}
