package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

// maxDelayPeek bounds --peek: each message peeked is held, body and all,
// until its queue has been read.
const maxDelayPeek = 1000

// countWarning is the delivery count from which delays --peek warns: a
// RabbitMQ 4 quorum queue dead-letters a message past its delivery limit,
// 20 unless set, and a level queue's dead-letter exchange is the next
// level down, so such a message is delivered early.
const countWarning = 10

type delaysOut struct {
	Now    time.Time `json:"now"` // the clock the due times are read against
	Broker string    `json:"broker,omitempty"`
	// Waiting is the ready messages on the levels, DeadLettering those
	// the levels hold waiting to be dead-lettered (null when they cannot
	// be seen), Unacked those taken and not yet settled (null likewise).
	Waiting       int  `json:"waiting"`
	DeadLettering *int `json:"dead_lettering"`
	Unacked       *int `json:"unacked"`
	// Total is every message seen on every queue of the layout, by every
	// count: what must be 0 before any of them is deleted. While Unseen
	// is set it is a floor, not the total.
	Total int `json:"total"`
	// Unseen says which counts could not be read, and why.
	Unseen          string          `json:"unseen,omitempty"`
	Management      string          `json:"management,omitempty"`
	ManagementError string          `json:"management_error,omitempty"`
	Levels          []delayQueueOut `json:"levels"`
	Undeliverable   delayQueueOut   `json:"undeliverable"`
	Missing         []string        `json:"missing"` // queues of the layout that do not exist
	// MissingExchanges are the layout's exchanges that do not exist (as
	// the management API lists them; empty without it).
	MissingExchanges []string      `json:"missing_exchanges"`
	Peek             *delayPeekOut `json:"peek,omitempty"`
}

// delayQueueOut is one queue of the layout: its ready messages and
// consumers as a passive declare sees them, the rest as the management
// API last sampled them.
type delayQueueOut struct {
	Level     *int   `json:"level,omitempty"` // absent for the undeliverable queue
	Queue     string `json:"queue"`
	Wait      string `json:"wait,omitempty"`
	WaitMS    int64  `json:"wait_ms,omitempty"`
	Messages  int    `json:"messages"` // ready
	Consumers int    `json:"consumers"`
	// Unacked and DeadLettering (the management API's
	// messages_unacknowledged and messages_dlx) are absent when they
	// cannot be seen: no management API, or NotSampledYet.
	Unacked       *int `json:"unacked,omitempty"`
	DeadLettering *int `json:"dead_lettering,omitempty"`
	// NotSampledYet: the management API lists the queue but has not
	// sampled its counts yet (declared in the last few seconds).
	NotSampledYet bool `json:"not_sampled_yet,omitempty"`
	Missing       bool `json:"missing,omitempty"`
	Peeked        *int `json:"peeked,omitempty"` // with --peek: how many were read
}

type delayPeekOut struct {
	PerQueue int `json:"per_queue"` // --peek: at most this many read from each queue
	// Levels says whether the level queues were read; LevelsSkipped says
	// why not (the broker would give them back where they would be late).
	Levels        bool   `json:"levels"`
	LevelsSkipped string `json:"levels_skipped,omitempty"`
	Peeked        int    `json:"peeked"`
	// MaxDeliveryCount is the highest x-delivery-count a peeked message
	// carried when it was taken; giving it back added one.
	MaxDeliveryCount int64            `json:"max_delivery_count"`
	Waiting          []destinationOut `json:"waiting"`       // read from the levels
	Undeliverable    []destinationOut `json:"undeliverable"` // read from the undeliverable queue
}

// destinationOut is what the peeked messages for one destination queue
// say about when they are due.
type destinationOut struct {
	// Queue is the destination their routing key names; "" for a routing
	// key that is not the layout's (a foreign client's).
	Queue    string `json:"queue"`
	Messages int    `json:"messages"`
	// NoDue counts the messages without a readable x-acemq-due.
	NoDue    int        `json:"no_due,omitempty"`
	Earliest *time.Time `json:"earliest_due,omitempty"`
	Latest   *time.Time `json:"latest_due,omitempty"`
}

// delays shows what waits on the delay queues: how many messages each
// level holds, how many are due and stuck, and, with --peek, for whom and
// when they are due.
func (a *app) delays(args []string) int {
	fs, asJSON, url := a.flags("delays", "[--peek N] [--management URL] [--url URL]",
		`Shows what waits on the delay queues of the vhost (`+delay.Prefix+`): the
messages on each of the 28 level queues, with the wait of each, and on
`+delay.Undeliverable+`, where a due message waits when its destination
queue did not exist when it was due (a server sends those round again every
10s). Ready messages are counted by a passive declare, which touches no
message. A level also holds messages waiting to be dead-lettered, neither
ready nor unacked: when the level below is full (a max-length policy) or
its exchange is missing, the level keeps what expired and RabbitMQ offers
it again about every 3 minutes. Only RabbitMQ's management API counts
those (messages_dlx), and unacked ones: delays reads it at --management, as
acemq status does (by default the broker's host on port 15672, with the
URL's user, who needs the monitoring tag), and says so plainly when it
cannot. Never delete a delay queue that is not empty by every count.

A queue or exchange of the layout that does not exist is shown missing, and
the exit status is then 1: acemq topology --delays --apply declares them.

With --peek N it also reads, with basic.get, up to N messages of each level
queue and of `+delay.Undeliverable+`, and shows for each
destination queue how many it found and the earliest and latest due time (x-acemq-due). It
holds the messages of a queue unacknowledged until it has read them all,
then gives them all back (basic.reject, requeue), in the order taken:
nothing is consumed. But each message peeked has its delivery count
(x-delivery-count) raised by one, and RabbitMQ 4 dead-letters a quorum
queue's message past its delivery limit (20 by default): for a level queue
that means sending it down to the next level, delivering it early, and for
`+delay.Undeliverable+` dropping it. So peek now and then, when
something looks wrong; never in a loop. With a first N of each level it shows a
sample, not all that waits.

The level queues are read only where the broker gives returned messages
back in their place: RabbitMQ 4.0 and later, and RabbitMQ before 3.10,
whose level queues are classic. RabbitMQ 3.10 to 3.13 puts a quorum
queue's returned messages at its back, behind messages due later, where
they would be delivered late; there --peek reads only
`+delay.Undeliverable+`.

Examples:
  acemq delays
  acemq delays --peek 20 --json
`, true)
	peekN := fs.Int("peek", 0, fmt.Sprintf("read up to this many messages of each queue (1 to %d) and show them by destination; 0: none", maxDelayPeek))
	management := fs.String("management", "", "the management API, http://host:15672 (default: the broker's host, or $"+EnvManagement+")")
	if code, done := a.parse(fs, args); done {
		return code
	}
	if *peekN < 0 || *peekN > maxDelayPeek {
		return a.usageError(fs, "--peek must be 0 to %d", maxDelayPeek)
	}
	t, code := a.connect(fs, *url)
	if t == nil {
		return code
	}
	defer t.Close()
	now := clockOf(t)()
	out := delaysOut{Now: now.UTC(), Levels: []delayQueueOut{}, Missing: []string{}, MissingExchanges: []string{}}
	levelsNote := ""
	if v, ok := t.(transport.Versioned); ok {
		product, version, err := v.BrokerVersion(a.ctx)
		if err != nil {
			return a.fail(fs, err)
		}
		out.Broker = strings.TrimSpace(product + " " + version)
		levelsNote = levelPeekRefusal(product, version)
	} else {
		levelsNote = levelPeekRefusal("", "")
	}
	for k := range delay.Levels {
		level := k
		q := delayQueueOut{Level: &level, Queue: delay.Level(k), Wait: span(delay.LevelWait(k)), WaitMS: delay.LevelWait(k).Milliseconds()}
		if err := a.inspectDelay(t, &q, &out); err != nil {
			return a.fail(fs, err)
		}
		out.Waiting += q.Messages
		out.Levels = append(out.Levels, q)
	}
	out.Undeliverable = delayQueueOut{Queue: delay.Undeliverable}
	if err := a.inspectDelay(t, &out.Undeliverable, &out); err != nil {
		return a.fail(fs, err)
	}
	if code, ok := a.countUnseen(fs, *management, &out); !ok {
		return code
	}
	if *peekN > 0 {
		p, err := a.peekDelays(t, &out, *peekN, levelsNote)
		out.Peek = p
		if err != nil {
			return a.fail(fs, fmt.Errorf("peek: %w (what was taken has been given back)", err))
		}
	}
	if *asJSON {
		a.printJSON(out)
	} else {
		a.printDelays(out)
	}
	if len(out.Missing) > 0 || len(out.MissingExchanges) > 0 {
		var what string
		switch {
		case len(out.Missing) == delay.Levels+1:
			what = "the delay queues are not declared on this vhost"
		case len(out.Missing) > 0:
			what = fmt.Sprintf("%d of the delay queues do not exist (%s ...)", len(out.Missing), out.Missing[0])
		default:
			what = fmt.Sprintf("%d of the delay exchanges do not exist (%s ...)", len(out.MissingExchanges), out.MissingExchanges[0])
		}
		fmt.Fprintf(a.stderr, "%s: %s; declare them with: acemq topology --delays --apply\n", fs.Name(), what)
		return exitError
	}
	return exitOK
}

// inspectDelay fills q from a passive declare; a missing queue is noted,
// not an error.
func (a *app) inspectDelay(t transport.Transport, q *delayQueueOut, out *delaysOut) error {
	info, err := t.Inspect(a.ctx, q.Queue)
	switch {
	case errors.Is(err, transport.ErrNotFound):
		q.Missing = true
		out.Missing = append(out.Missing, q.Queue)
		return nil
	case err != nil:
		return err
	}
	q.Messages, q.Consumers = info.Messages, info.Consumers
	return nil
}

// levelPeekRefusal says why the level queues must not be peeked on a
// broker that announced product and version, or "" when they may: where
// the broker gives a returned message back in its place, or ahead of the
// rest with its expiry kept, it is due when it was; where it puts it at
// the back, the message waits there until every message ahead of it, due
// up to a level's wait later, has expired (a quorum queue expires only its
// head), and is delivered that much late.
func levelPeekRefusal(product, version string) string {
	if product == "" && version == "" {
		return "the broker did not say which it is, so how it gives back a level queue's messages is not known (RabbitMQ 3.10 to 3.13 would make them late)"
	}
	if product != "RabbitMQ" {
		return fmt.Sprintf("%s is not RabbitMQ, so how it gives back a level queue's messages is not known", strings.TrimSpace(product+" "+version))
	}
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return fmt.Sprintf("RabbitMQ %q is not a version this command knows, so how it gives back a level queue's messages is not known", version)
	}
	if major >= 4 || !delay.SupportsQuorum(product, version) {
		return "" // at the front, expiry kept (4.x); in place (classic levels, before 3.10)
	}
	return fmt.Sprintf("RabbitMQ %s puts a quorum queue's returned messages at its back, behind messages due later, where they would be delivered late (RabbitMQ 4.0 and later give them back in their place)", version)
}

// peekDelays reads up to n messages of each level (unless levelsNote says
// why not) and of the undeliverable queue, each queue's held until it is
// read and then given back.
func (a *app) peekDelays(t transport.Transport, out *delaysOut, n int, levelsNote string) (*delayPeekOut, error) {
	p := &delayPeekOut{PerQueue: n, Levels: levelsNote == "", LevelsSkipped: levelsNote,
		Waiting: []destinationOut{}, Undeliverable: []destinationOut{}}
	read := func(q *delayQueueOut, into *[]destinationOut) error {
		if q.Missing {
			return nil
		}
		by := map[string]*destinationOut{}
		taken := 0
		var err error
		if q.Messages > 0 { // an empty queue is left alone: no delivery counted
			taken, err = a.borrow(t, q.Queue, n, func(d transport.Delivery) {
				to := delay.Destination(d.RoutingKey)
				dest := by[to]
				if dest == nil {
					dest = &destinationOut{Queue: to}
					by[to] = dest
				}
				dest.add(d.Headers[delay.DueHeader])
				if c, ok := transport.Int64(d.Headers["x-delivery-count"]); ok && c > p.MaxDeliveryCount {
					p.MaxDeliveryCount = c
				}
			})
		}
		q.Peeked = &taken
		p.Peeked += taken
		*into = merge(*into, by)
		return err
	}
	if p.Levels {
		for i := range out.Levels {
			if err := read(&out.Levels[i], &p.Waiting); err != nil {
				return p, err
			}
		}
	}
	return p, read(&out.Undeliverable, &p.Undeliverable)
}

// add counts one message whose x-acemq-due header is due. The header is
// the producer's: anything but an integer in the years 1970 to 9999 is
// counted as no due time rather than trusted (JSON cannot write a time
// past 9999).
func (d *destinationOut) add(due any) {
	d.Messages++
	ms, ok := transport.Int64(due)
	if !ok || ms < 0 || ms > maxDueMS {
		d.NoDue++
		return
	}
	at := time.UnixMilli(ms).UTC()
	if d.Earliest == nil || at.Before(*d.Earliest) {
		d.Earliest = &at
	}
	if d.Latest == nil || at.After(*d.Latest) {
		d.Latest = &at
	}
}

// maxDueMS is the last millisecond of the year 9999.
var maxDueMS = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()

// merge adds the destinations of by to list, sorted by earliest due (none
// last), then by name.
func merge(list []destinationOut, by map[string]*destinationOut) []destinationOut {
	for _, d := range by {
		i := slices.IndexFunc(list, func(e destinationOut) bool { return e.Queue == d.Queue })
		if i < 0 {
			list = append(list, *d)
			continue
		}
		e := &list[i]
		e.Messages += d.Messages
		e.NoDue += d.NoDue
		if d.Earliest != nil && (e.Earliest == nil || d.Earliest.Before(*e.Earliest)) {
			e.Earliest = d.Earliest
		}
		if d.Latest != nil && (e.Latest == nil || d.Latest.After(*e.Latest)) {
			e.Latest = d.Latest
		}
	}
	slices.SortFunc(list, func(x, y destinationOut) int {
		switch {
		case x.Earliest == nil && y.Earliest != nil:
			return 1
		case x.Earliest != nil && y.Earliest == nil:
			return -1
		case x.Earliest != nil && !x.Earliest.Equal(*y.Earliest):
			return x.Earliest.Compare(*y.Earliest)
		}
		return cmp.Compare(x.Queue, y.Queue)
	})
	return list
}
