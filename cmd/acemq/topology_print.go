package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/acemq/acemq/transport"
)

// What acemq topology prints: the declarations as rows, grouped by
// partition for a partitioned queue, or as JSON.

type topologyOut struct {
	Applied          bool                  `json:"applied"`
	Queue            string                `json:"queue,omitempty"`      // the logical queue, with --queue
	Partitions       []partitionOut        `json:"partitions,omitempty"` // its partitions, with --partitions
	Ordered          bool                  `json:"ordered,omitempty"`
	Strays           []strayOut            `json:"strays,omitempty"`       // with --apply: topology_strays.go
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
	// Home is a partition's node: declared through node Home-1 modulo the
	// number of URLs given (transport.Queue.Home), to spread the leaders.
	Home int `json:"home,omitempty"`
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

// partitionOut is one partition of a partitioned queue: its queues and
// bindings are in topologyOut's lists, in partition order.
type partitionOut struct {
	Queue string `json:"queue"`
	Index int    `json:"index"`
}

// printPlan writes the plan's declarations, one row each: for a queue that
// is not partitioned, in the order they are declared; for a partitioned
// one, the exchanges its partitions share, then each partition's queues
// and bindings under its name, then the delay queues.
func printPlan(w io.Writer, p *topologyPlan) {
	if p.spec.partitions == 0 {
		printRows(w, p.all())
		return
	}
	shared := topologyPlan{queues: p.queues}
	printRows(w, transport.Topology{Exchanges: shared.all().Exchanges})
	for _, q := range p.queues {
		fmt.Fprintf(w, "\n%s, partition %d of %d:\n", q.name, q.index, len(p.queues))
		rows := transport.Topology{Queues: q.topology.Queues, Bindings: q.topology.Bindings}
		if b, ok := p.bindFor(q.name); ok {
			rows.Bindings = append(slices.Clip(rows.Bindings), b)
		}
		printRows(w, rows)
	}
	if p.kind != "" {
		fmt.Fprintln(w, "\nthe delay queues, one set per vhost:")
		printRows(w, p.delays)
	}
}

// printRows writes t's declarations as aligned rows.
func printRows(w io.Writer, t transport.Topology) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, x := range t.Exchanges {
		fmt.Fprintf(tw, "exchange\t%s\t%s%s%s\n", x.Name, x.Kind, durable(x.Durable), formatArgs(x.Args))
	}
	for _, q := range t.Queues {
		fmt.Fprintf(tw, "queue\t%s\t%s\n", q.Name, strings.TrimPrefix(durable(q.Durable)+formatArgs(q.Args), " "))
	}
	for _, b := range t.Bindings {
		fmt.Fprintf(tw, "binding\t%s\tto exchange %s with key %s\n", b.Queue, b.Exchange, b.Key)
	}
	for _, b := range t.ExchangeBindings {
		fmt.Fprintf(tw, "binding\texchange %s\tto exchange %s with key %s\n", b.Destination, b.Source, b.Key)
	}
	_ = tw.Flush()
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

// topologyJSON is t as --json prints it.
func topologyJSON(t transport.Topology, applied bool) topologyOut {
	out := topologyOut{Applied: applied, Exchanges: []exchangeJSON{}, Queues: []queueJSON{}, Bindings: []bindingJSON{}}
	for _, x := range t.Exchanges {
		out.Exchanges = append(out.Exchanges, exchangeJSON{x.Name, x.Kind, x.Durable, x.Args})
	}
	for _, q := range t.Queues {
		out.Queues = append(out.Queues, queueJSON{q.Name, q.Durable, q.Args, q.Home})
	}
	for _, b := range t.Bindings {
		out.Bindings = append(out.Bindings, bindingJSON{b.Queue, b.Exchange, b.Key})
	}
	for _, b := range t.ExchangeBindings {
		out.ExchangeBindings = append(out.ExchangeBindings, exchangeBindingJSON{b.Destination, b.Source, b.Key})
	}
	return out
}
