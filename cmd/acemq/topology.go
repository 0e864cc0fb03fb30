package main

import (
	"fmt"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/retry"
)

// topology prints, or applies, what a consumer of a queue declares, so that
// services can run with declare off under a user without configure rights.
func (a *app) topology(args []string) int {
	fs, asJSON, url := a.flags("topology", "[--queue Q] [--attempts N --initial D ...] [--arg k=v] [--partitions N] [--ordered] [--delivery-limit N] [--delays] [--apply] [--url URL [--node URL ...]]",
		`Prints the declarations a consumer of Q makes at start-up: the exchanges
acemq.retry and acemq.dlx, Q, Q.dlq, Q.parked, one rung queue per distinct
wait of the retry policy spent in the broker, and the binding that brings an
expired retry home. With --apply it declares them (needs configure rights);
declaring what already exists identically changes nothing.

Give the retry flags and --arg exactly as the service has them: a rung or
queue declared with other arguments is refused (PRECONDITION_FAILED) to the
next one that declares it. Without retry flags there are no rungs.

Give the queue's settings from its acemq.QueueConfig the same way:
--partitions N (Partitions) declares Q.p0 to Q.p{N-1} instead of Q, each
a whole queue with its own .dlq, .parked, rungs and bindings, and no Q;
--ordered (Ordered) declares each with x-single-active-consumer, and needs
--arg x-queue-type=quorum; --delivery-limit N (DeliveryLimit) declares
x-delivery-limit and the route past it into each queue's own .dlq. The
output groups a partitioned queue's declarations by partition. After
--apply it says the queues of another count that are there, which a
server with this one does not consume: Q itself, or Q.pN onwards (of a
larger count before), or Q.p0 onwards when Q is not partitioned.

On a cluster give every node, --url one and --node each other: partition
i is declared through node i (modulo their number, in the URLs' sorted
order), as a server given the same URLs declares it, so that RabbitMQ's
default leader locator (client-local) spreads the partitions' leaders.
Declared through one node, every partition is led by it, and a queue
that exists keeps its leader when a server declares it again.

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
classic are kept so. A server declares the delay queues and binds its
queues to them whatever its retry policy: with --delays, topology
declares all that a server of Q declares.

Examples:
  acemq topology --queue orders --attempts 5 --initial 10s --max 10m --apply
  acemq topology --queue orders --partitions 4 --ordered --arg x-queue-type=quorum --delivery-limit 20 --apply
  acemq topology --delays --queue orders --apply
`, true)
	queue := fs.String("queue", "", "the work queue")
	apply := fs.Bool("apply", false, "declare them on the broker (default: only print them)")
	delays := fs.Bool("delays", false, "also the delay queues ("+delay.Prefix+") and, with --queue, the queue's binding to them")
	qargs := queueArgs{}
	fs.Var(qargs, "arg", "an argument of the work queue, key=value (repeatable), e.g. x-queue-type=quorum")
	partitions := fs.Int("partitions", 0, "the queue is partitioned in this many (QueueConfig.Partitions): Q.p0 .. Q.p{N-1}, each with its own topology")
	ordered := fs.Bool("ordered", false, "the queue is ordered (QueueConfig.Ordered): single active consumer; needs --arg x-queue-type=quorum")
	var nodes nodeURLs
	fs.Var(&nodes, "node", "with --apply: another node of the cluster --url is a node of (repeatable); a partitioned queue's partitions are declared each through its own node, to spread their leaders")
	deliveryLimit := fs.Int("delivery-limit", 0, "the broker's delivery limit (QueueConfig.DeliveryLimit), with its route into .dlq; needs a quorum queue")
	var pf policyFlags
	pf.register(fs)
	if code, done := a.parse(fs, args); done {
		return code
	}
	*delays = *delays || pf.delays
	if *queue == "" && !*delays {
		return a.usageError(fs, "--queue is required (or --delays, for the delay queues alone)")
	}
	if *queue == "" && (pf.given() || len(qargs) > 0 || *partitions != 0 || *ordered || *deliveryLimit != 0) {
		return a.usageError(fs, "the retry flags, --arg, --partitions, --ordered and --delivery-limit describe a queue: give --queue too")
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
	plan := topologyPlan{spec: queueSpec{name: *queue, policy: pol, args: qargs, partitions: *partitions, ordered: *ordered, deliveryLimit: *deliveryLimit}}
	if *queue != "" {
		var err error
		if plan.queues, err = plan.spec.queues(); err != nil {
			return a.usageError(fs, "%v", err)
		}
	}
	if *delays {
		plan.delays, plan.kind = delay.Topology(), "quorum"
		for _, q := range plan.queues {
			b, err := delay.Bind(q.name)
			if err != nil {
				return a.usageError(fs, "--delays: %v", err)
			}
			plan.binds = append(plan.binds, b)
		}
	}
	var note string
	var strays []strayOut
	if len(nodes) > 0 && !*apply {
		return a.usageError(fs, "--node goes with --apply")
	}
	if *apply {
		a.ctx = withNodes(a.ctx, nodes)
		t, code := a.connect(fs, *url)
		if t == nil {
			return code
		}
		defer t.Close()
		var err error
		if note, err = a.declarePlan(t, &plan); err != nil {
			return a.fail(fs, err)
		}
		if *queue != "" {
			if strays, err = a.strays(t, plan.spec); err != nil {
				return a.fail(fs, err)
			}
		}
	}
	if *asJSON {
		out := topologyJSON(plan.all(), *apply)
		out.DelayQueues, out.Queue, out.Ordered, out.Strays = plan.kind, *queue, *ordered, strays
		if *partitions > 0 {
			for _, q := range plan.queues {
				out.Partitions = append(out.Partitions, partitionOut{Queue: q.name, Index: q.index})
			}
		}
		a.printJSON(out)
		return exitOK
	}
	switch {
	case *apply:
		fmt.Fprintf(a.stdout, "declared on %s:\n", amqpconn.Redact(a.url))
	case *queue != "" && *partitions > 0:
		fmt.Fprintf(a.stdout, "a consumer of %s, in %s (%s .. %s), declares (dry run: --apply declares them):\n",
			*queue, plural(*partitions, "partition"), plan.queues[0].name, plan.queues[len(plan.queues)-1].name)
	case *queue != "":
		fmt.Fprintf(a.stdout, "a consumer of %s declares (dry run: --apply declares them):\n", *queue)
	default:
		fmt.Fprintln(a.stdout, "the delay queues of a vhost (dry run: --apply declares them):")
	}
	printPlan(a.stdout, &plan)
	if note != "" {
		fmt.Fprintln(a.stdout, note)
	}
	a.printStrays(strays)
	return exitOK
}
