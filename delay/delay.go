package delay

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

const (
	// Unit is the resolution: every delay is a whole number of units,
	// rounded up.
	Unit = 125 * time.Millisecond
	// Levels is the number of level queues.
	Levels = 28
	// Max is the longest delay: every level once, (2^28 − 1) units, about
	// 388 days.
	Max = (1<<Levels - 1) * Unit
	// MaxQueueName is the longest destination a routing key can carry:
	// 255 bytes less the 28 bit-words and their dots.
	MaxQueueName = 255 - 2*Levels

	// Prefix starts every name of the layout; the version lets a later
	// layout run beside this one.
	Prefix = "acemq.delay.v1"
	// Deliver is the exchange a due message reaches, which routes it to its
	// destination.
	Deliver = Prefix + ".deliver"
	// Undeliverable is the exchange and the queue of due messages whose
	// destination did not exist when they were due.
	Undeliverable = Prefix + ".undeliverable"
	// DueHeader carries a waiting message's due time, Unix milliseconds
	// (int64), for an operator's tools.
	DueHeader = wire.Due
)

var (
	// ErrTooLong is a delay over Max.
	ErrTooLong = errors.New("acemq: delay longer than the delay infrastructure's maximum")
	// ErrDestination is a destination queue the routing key cannot carry:
	// empty, over MaxQueueName bytes, or with a word "*" or "#" that a
	// binding would read as a wildcard.
	ErrDestination = errors.New("acemq: destination cannot be delayed to")
)

// Level is the name of level k's exchange and queue.
func Level(k int) string { return fmt.Sprintf("%s.%02d", Prefix, k) }

// Queues names the layout's queues: Undeliverable, then the levels from 0.
// A tool that checks or counts the delay queues goes through these.
func Queues() []string {
	names := make([]string, 0, Levels+1)
	names = append(names, Undeliverable)
	for k := range Levels {
		names = append(names, Level(k))
	}
	return names
}

// Exchanges names the layout's exchanges: Deliver, Undeliverable, then
// the levels from 0. A missing one makes the level above it hold what it
// dead-letters there (neither ready nor unacked), and a publish to it fail.
func Exchanges() []string { return append([]string{Deliver}, Queues()...) }

// LevelWait is how long a message waits on level k.
func LevelWait(k int) time.Duration { return Unit << k }

// Units is d in units, rounded up; zero for d ≤ 0.
func Units(d time.Duration) (uint64, error) {
	if d <= 0 {
		return 0, nil
	}
	if d > Max {
		return 0, fmt.Errorf("%w: %v is over %v", ErrTooLong, d, Max)
	}
	return uint64((d + Unit - 1) / Unit), nil
}

// Route is where a delayed message is published: Exchange is the level of
// its highest set bit (Deliver for no delay), Key the routing key, Wait the
// delay rounded up to the unit.
type Route struct {
	Exchange string
	Key      string
	Wait     time.Duration
}

// RouteTo returns the route of a message for queue after d.
func RouteTo(queue string, d time.Duration) (Route, error) {
	if err := checkQueue(queue); err != nil {
		return Route{}, err
	}
	n, err := Units(d)
	if err != nil {
		return Route{}, err
	}
	var b strings.Builder
	b.Grow(2*Levels + len(queue))
	top := -1
	for k := Levels - 1; k >= 0; k-- {
		if n&(1<<k) != 0 {
			b.WriteString("1.")
			if top < 0 {
				top = k
			}
		} else {
			b.WriteString("0.")
		}
	}
	b.WriteString(queue)
	r := Route{Exchange: Deliver, Key: b.String(), Wait: time.Duration(n) * Unit}
	if top >= 0 {
		r.Exchange = Level(top)
	}
	return r, nil
}

// Aim points p, a publish to queue by the default exchange, at the delay
// queues: to the route for d, with the due time in DueHeader. It is how
// the Publisher schedules a message and how a server sends a retry or a
// snooze that waits on the delay queues.
func Aim(p *transport.Publishing, queue string, d time.Duration, now time.Time) (Route, error) {
	r, err := RouteTo(queue, d)
	if err != nil {
		return r, err
	}
	p.Exchange, p.RoutingKey = r.Exchange, r.Key
	if p.Headers == nil {
		p.Headers = map[string]any{}
	}
	p.Headers[DueHeader] = now.Add(r.Wait).UnixMilli()
	return r, nil
}

// CanDeliver reports why queue cannot be a delayed message's destination,
// or nil if it can.
func CanDeliver(queue string) error { return checkQueue(queue) }

func checkQueue(queue string) error {
	switch {
	case queue == "":
		return fmt.Errorf("%w: no queue named", ErrDestination)
	case len(queue) > MaxQueueName:
		return fmt.Errorf("%w: queue %q is %d bytes, over the %d a delayed routing key can carry",
			ErrDestination, queue, len(queue), MaxQueueName)
	}
	for _, w := range strings.Split(queue, ".") {
		if w == "*" || w == "#" {
			return fmt.Errorf("%w: queue %q has the word %q, a wildcard to a topic binding", ErrDestination, queue, w)
		}
	}
	return nil
}

// Bind is the binding that lets due messages for queue reach it: exactly 28
// words, then the queue's (a "#" would also match a longer name ending in
// queue's words).
func Bind(queue string) (transport.Binding, error) {
	if err := checkQueue(queue); err != nil {
		return transport.Binding{}, err
	}
	return transport.Binding{Queue: queue, Exchange: Deliver, Key: strings.Repeat("*.", Levels) + queue}, nil
}

// Topology is the delay infrastructure of a vhost, declared once and
// idempotently, before any [Bind]: quorum queues whose dead-lettering is
// at least once, so a waiting message survives the loss of a node. It
// needs RabbitMQ 3.10 or later with the stream_queue feature flag on (on
// by default since 3.9, always on from 4.0); see [SupportsQuorum].
func Topology() transport.Topology { return topology(true) }

// ClassicTopology is the same layout on classic queues, for a broker
// older than RabbitMQ 3.10: the names, TTLs, bindings and routing are
// Topology's, but RabbitMQ dead-letters out of a classic queue at most
// once, so a message waiting on a level when its node is lost, or whose
// dead-lettering fails, is lost. Declare it only where Topology cannot be.
func ClassicTopology() transport.Topology { return topology(false) }

// SupportsQuorum reports whether a broker that announced product and
// version (the AMQP server properties) can hold [Topology]: RabbitMQ 3.10
// or later. A broker that said nothing is assumed to.
func SupportsQuorum(product, version string) bool {
	if product == "" && version == "" {
		return true
	}
	if product != "RabbitMQ" {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 3 || major == 3 && minor >= 10
}

func topology(quorum bool) transport.Topology {
	queueArgs := func(args map[string]any) map[string]any {
		if quorum {
			args["x-queue-type"] = "quorum"
			if _, dl := args["x-dead-letter-exchange"]; dl {
				args["x-dead-letter-strategy"] = "at-least-once"
			}
		}
		return args
	}
	t := transport.Topology{
		Exchanges: []transport.Exchange{
			{Name: Undeliverable, Kind: "fanout", Durable: true},
			{Name: Deliver, Kind: "topic", Durable: true, Args: map[string]any{"alternate-exchange": Undeliverable}},
		},
		Queues: []transport.Queue{{Name: Undeliverable, Durable: true, Args: queueArgs(map[string]any{
			"x-overflow": "reject-publish",
		})}},
		Bindings: []transport.Binding{{Queue: Undeliverable, Exchange: Undeliverable}},
	}
	for k := range Levels {
		next := Deliver
		if k > 0 {
			next = Level(k - 1)
		}
		skip := strings.Repeat("*.", Levels-1-k)
		t.Exchanges = append(t.Exchanges, transport.Exchange{Name: Level(k), Kind: "topic", Durable: true})
		t.Queues = append(t.Queues, transport.Queue{Name: Level(k), Durable: true, Args: queueArgs(map[string]any{
			"x-message-ttl":          LevelWait(k).Milliseconds(),
			"x-dead-letter-exchange": next,
			"x-overflow":             "reject-publish",
		})})
		t.Bindings = append(t.Bindings, transport.Binding{Queue: Level(k), Exchange: Level(k), Key: skip + "1.#"})
		t.ExchangeBindings = append(t.ExchangeBindings,
			transport.ExchangeBinding{Destination: next, Source: Level(k), Key: skip + "0.#"})
	}
	return t
}
