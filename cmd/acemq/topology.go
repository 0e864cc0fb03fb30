package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

type topologyOut struct {
	Applied          bool                  `json:"applied"`
	DelayQueues      string                `json:"delay_queues,omitempty"` // "quorum" or "classic", with --delays
	Exchanges        []exchangeJSON        `json:"exchanges"`
	Queues           []queueJSON           `json:"queues"`
	Bindings         []bindingJSON         `json:"bindings"`
	ExchangeBindings []exchangeBindingJSON `json:"exchange_bindings,omitempty"`
}

type exchangeJSON struct {
	Name    string         `json:"name"`
	Kind    string         `json:"kind"`
	Durable bool           `json:"durable"`
	Args    map[string]any `json:"args,omitempty"`
}

type queueJSON struct {
	Name    string         `json:"name"`
	Durable bool           `json:"durable"`
	Args    map[string]any `json:"args,omitempty"`
}

type bindingJSON struct {
	Queue    string `json:"queue"`
	Exchange string `json:"exchange"`
	Key      string `json:"key"`
}

// exchangeBindingJSON is an exchange-to-exchange binding: what Source
// routes with a matching key, Destination routes on.
type exchangeBindingJSON struct {
	Destination string `json:"destination"`
	Source      string `json:"source"`
	Key         string `json:"key"`
}

// topology prints, or applies, what a consumer of a queue declares, so that
// services can run with declare off under a user without configure rights.
func (a *app) topology(args []string) int {
	fs, asJSON, url := a.flags("topology", "[--queue Q] [--attempts N --initial D ...] [--arg k=v] [--delays] [--apply] [--url URL]",
		`Prints the declarations a consumer of Q makes at start-up: the exchanges
acemq.retry and acemq.dlx, Q, Q.dlq, Q.parked, one rung queue per distinct
wait of the retry policy spent in the broker, and the binding that brings an
expired retry home. With --apply it declares them (needs configure rights);
declaring what already exists identically changes nothing.

Give the retry flags and --arg exactly as the service has them: a rung or
queue declared with other arguments is refused (PRECONDITION_FAILED) to the
next one that declares it. Without retry flags there are no rungs.

With --delays (implied by --on-delay-queues) it adds the delay queues, one
set per vhost: 28 level exchanges and quorum queues `+delay.Level(0)+` to
`+delay.Level(delay.Levels-1)+`, the exchange `+delay.Deliver+`, the
exchange and queue `+delay.Undeliverable+`, and the
bindings that walk a message down the levels; and, with --queue, the
binding of Q to `+delay.Deliver+` that lets due messages reach
it. --queue may then be left out, to declare the delay queues alone. On
a broker before RabbitMQ 3.10 --apply declares them as classic queues, as
a server does (a node lost while messages wait on them loses those
messages: docs/operators.md); delay queues that an older broker declared
classic are kept so.

Examples:
  acemq topology --queue orders --attempts 5 --initial 10s --max 10m --apply
  acemq topology --delays --queue orders --apply
`, true)
	queue := fs.String("queue", "", "the work queue")
	apply := fs.Bool("apply", false, "declare them on the broker (default: only print them)")
	delays := fs.Bool("delays", false, "also the delay queues ("+delay.Prefix+") and, with --queue, the queue's binding to them")
	qargs := queueArgs{}
	fs.Var(qargs, "arg", "an argument of the work queue, key=value (repeatable), e.g. x-queue-type=quorum")
	var pf policyFlags
	pf.register(fs)
	if code, done := a.parse(fs, args); done {
		return code
	}
	*delays = *delays || pf.delays
	if *queue == "" && !*delays {
		return a.usageError(fs, "--queue is required (or --delays, for the delay queues alone)")
	}
	if *queue == "" && (pf.given() || len(qargs) > 0) {
		return a.usageError(fs, "the retry flags and --arg describe a queue: give --queue too")
	}
	pol := retry.None()
	if pf.given() {
		var err error
		if pol, err = pf.policy(); err != nil {
			return a.usageError(fs, "%v", err)
		}
	}
	if len(qargs) == 0 {
		qargs = nil
	}
	var plan topologyPlan
	if *queue != "" {
		plan.queue = acemq.Topology(*queue, pol, qargs)
	}
	if *delays {
		plan.delays, plan.kind = delay.Topology(), "quorum"
		if *queue != "" {
			b, err := delay.Bind(*queue)
			if err != nil {
				return a.usageError(fs, "--delays: %v", err)
			}
			plan.bind = transport.Topology{Bindings: []transport.Binding{b}}
		}
	}
	var note string
	if *apply {
		t, code := a.connect(fs, *url)
		if t == nil {
			return code
		}
		defer t.Close()
		var err error
		if note, err = a.declarePlan(t, &plan); err != nil {
			return a.fail(fs, err)
		}
	}
	top := plan.all()
	if *asJSON {
		out := topologyJSON(top, *apply)
		out.DelayQueues = plan.kind
		a.printJSON(out)
		return exitOK
	}
	switch {
	case *apply:
		fmt.Fprintf(a.stdout, "declared on %s:\n", amqpconn.Redact(a.url))
	case *queue != "":
		fmt.Fprintf(a.stdout, "a consumer of %s declares (dry run: --apply declares them):\n", *queue)
	default:
		fmt.Fprintln(a.stdout, "the delay queues of a vhost (dry run: --apply declares them):")
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	for _, x := range top.Exchanges {
		fmt.Fprintf(tw, "exchange\t%s\t%s%s%s\n", x.Name, x.Kind, durable(x.Durable), formatArgs(x.Args))
	}
	for _, q := range top.Queues {
		fmt.Fprintf(tw, "queue\t%s\t%s\n", q.Name, strings.TrimPrefix(durable(q.Durable)+formatArgs(q.Args), " "))
	}
	for _, b := range top.Bindings {
		fmt.Fprintf(tw, "binding\t%s\tto exchange %s with key %s\n", b.Queue, b.Exchange, b.Key)
	}
	for _, b := range top.ExchangeBindings {
		fmt.Fprintf(tw, "binding\texchange %s\tto exchange %s with key %s\n", b.Destination, b.Source, b.Key)
	}
	_ = tw.Flush()
	if note != "" {
		fmt.Fprintln(a.stdout, note)
	}
	return exitOK
}

// topologyPlan is what topology declares, in its order: the queue's own
// topology, then the delay queues, then the queue's binding to them (which
// needs both).
type topologyPlan struct {
	queue, delays, bind transport.Topology
	kind                string // the delay queues' type: "quorum", "classic"; "" without them
}

func (p *topologyPlan) all() transport.Topology {
	var t transport.Topology
	for _, part := range []transport.Topology{p.queue, p.delays, p.bind} {
		t.Exchanges = append(t.Exchanges, part.Exchanges...)
		t.Queues = append(t.Queues, part.Queues...)
		t.Bindings = append(t.Bindings, part.Bindings...)
		t.ExchangeBindings = append(t.ExchangeBindings, part.ExchangeBindings...)
	}
	return t
}

// declarePlan declares p as a server would: the delay queues as quorum
// queues where the broker can hold them, else classic; and classic ones
// kept where an older broker declared them so (RabbitMQ refuses to change
// a queue's type). It returns a line to print about the delay queues'
// type when they are classic.
func (a *app) declarePlan(t transport.Transport, p *topologyPlan) (string, error) {
	var note string
	if len(p.queue.Queues) > 0 {
		if err := t.Declare(a.ctx, p.queue); err != nil {
			return "", fmt.Errorf("declare the topology of %q: %w", p.queue.Queues[0].Name, err)
		}
	}
	if p.kind != "" {
		if v, ok := t.(transport.Versioned); ok {
			product, version, err := v.BrokerVersion(a.ctx)
			if err != nil {
				return "", fmt.Errorf("declare the delay queues: %w", err)
			}
			if !delay.SupportsQuorum(product, version) {
				p.delays, p.kind = delay.ClassicTopology(), "classic"
				note = fmt.Sprintf("(%s cannot hold quorum queues with at-least-once dead-lettering, so the delay queues are classic: a node lost while messages wait on them loses those messages)",
					strings.TrimSpace(product+" "+version))
			}
		}
		err := t.Declare(a.ctx, p.delays)
		if p.kind == "quorum" && errors.Is(err, transport.ErrPreconditionFailed) {
			if t.Declare(a.ctx, delay.ClassicTopology()) == nil {
				p.delays, p.kind, err = delay.ClassicTopology(), "classic", nil
				note = "(the delay queues exist as classic queues, declared so by an older broker, and are kept: a node lost while messages wait on them loses those messages; " +
					"to have quorum ones, delete them when acemq delays shows them empty, and apply again)"
			}
		}
		if err != nil {
			return "", fmt.Errorf("declare the delay queues: %w", err)
		}
	}
	if len(p.bind.Bindings) > 0 {
		if err := t.Declare(a.ctx, p.bind); err != nil {
			b := p.bind.Bindings[0]
			return "", fmt.Errorf("bind queue %q to %s: %w", b.Queue, b.Exchange, err)
		}
	}
	return note, nil
}

func durable(d bool) string {
	if d {
		return " durable"
	}
	return " transient"
}

// formatArgs writes arguments sorted by key: x-message-ttl=40000 ...
func formatArgs(args map[string]any) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(args)) {
		fmt.Fprintf(&b, " %s=%v", k, args[k])
	}
	return b.String()
}

func topologyJSON(t transport.Topology, applied bool) topologyOut {
	out := topologyOut{Applied: applied, Exchanges: []exchangeJSON{}, Queues: []queueJSON{}, Bindings: []bindingJSON{}}
	for _, x := range t.Exchanges {
		out.Exchanges = append(out.Exchanges, exchangeJSON{x.Name, x.Kind, x.Durable, x.Args})
	}
	for _, q := range t.Queues {
		out.Queues = append(out.Queues, queueJSON{q.Name, q.Durable, q.Args})
	}
	for _, b := range t.Bindings {
		out.Bindings = append(out.Bindings, bindingJSON{b.Queue, b.Exchange, b.Key})
	}
	for _, b := range t.ExchangeBindings {
		out.ExchangeBindings = append(out.ExchangeBindings, exchangeBindingJSON{b.Destination, b.Source, b.Key})
	}
	return out
}
