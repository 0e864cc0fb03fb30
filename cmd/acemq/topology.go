package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

type topologyOut struct {
	Applied   bool           `json:"applied"`
	Exchanges []exchangeJSON `json:"exchanges"`
	Queues    []queueJSON    `json:"queues"`
	Bindings  []bindingJSON  `json:"bindings"`
}

type exchangeJSON struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Durable bool   `json:"durable"`
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

// topology prints, or applies, what a consumer of a queue declares, so that
// services can run with declare off under a user without configure rights.
func (a *app) topology(args []string) int {
	fs, asJSON, url := a.flags("topology", "--queue Q [--attempts N --initial D ...] [--arg k=v] [--apply] [--url URL]",
		`Prints the declarations a consumer of Q makes at start-up: the exchanges
acemq.retry and acemq.dlx, Q, Q.dlq, Q.parked, one rung queue per distinct
wait of the retry policy spent in the broker, and the binding that brings an
expired retry home. With --apply it declares them (needs configure rights);
declaring what already exists identically changes nothing.

Give the retry flags and --arg exactly as the service has them: a rung or
queue declared with other arguments is refused (PRECONDITION_FAILED) to the
next one that declares it. Without retry flags there are no rungs.

Example:
  acemq topology --queue orders --attempts 5 --initial 10s --max 10m --apply
`, true)
	queue := fs.String("queue", "", "the work queue")
	apply := fs.Bool("apply", false, "declare them on the broker (default: only print them)")
	qargs := queueArgs{}
	fs.Var(qargs, "arg", "an argument of the work queue, key=value (repeatable), e.g. x-queue-type=quorum")
	var pf policyFlags
	pf.register(fs)
	if code, done := a.parse(fs, args); done {
		return code
	}
	if *queue == "" {
		return a.usageError(fs, "--queue is required")
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
	top := acemq.Topology(*queue, pol, qargs)
	if *apply {
		t, code := a.connect(fs, *url)
		if t == nil {
			return code
		}
		defer t.Close()
		if err := t.Declare(a.ctx, top); err != nil {
			return a.fail(fs, fmt.Errorf("declare the topology of %q: %w", *queue, err))
		}
	}
	if *asJSON {
		a.printJSON(topologyJSON(top, *apply))
		return exitOK
	}
	if *apply {
		fmt.Fprintf(a.stdout, "declared on %s:\n", amqpconn.Redact(a.url))
	} else {
		fmt.Fprintf(a.stdout, "a consumer of %s declares (dry run: --apply declares them):\n", *queue)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
	for _, x := range top.Exchanges {
		fmt.Fprintf(tw, "exchange\t%s\t%s%s\n", x.Name, x.Kind, durable(x.Durable))
	}
	for _, q := range top.Queues {
		fmt.Fprintf(tw, "queue\t%s\t%s\n", q.Name, strings.TrimPrefix(durable(q.Durable)+formatArgs(q.Args), " "))
	}
	for _, b := range top.Bindings {
		fmt.Fprintf(tw, "binding\t%s\tto exchange %s with key %s\n", b.Queue, b.Exchange, b.Key)
	}
	_ = tw.Flush()
	return exitOK
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
		out.Exchanges = append(out.Exchanges, exchangeJSON{x.Name, x.Kind, x.Durable})
	}
	for _, q := range t.Queues {
		out.Queues = append(out.Queues, queueJSON{q.Name, q.Durable, q.Args})
	}
	for _, b := range t.Bindings {
		out.Bindings = append(out.Bindings, bindingJSON{b.Queue, b.Exchange, b.Key})
	}
	return out
}
