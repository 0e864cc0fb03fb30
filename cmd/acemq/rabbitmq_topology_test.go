package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
)

// TestRabbitMQTopologyPartitions: on RabbitMQ, what acemq topology
// --delays --apply declares for an ordered partitioned quorum queue with
// a delivery limit and rungs is what a Server with that QueueConfig
// declares, every partition's queues, arguments and bindings: the Server
// starts on it (no PRECONDITION_FAILED) and declares nothing it did not.
// And the broker does refuse a Server whose partitions differ from what
// was declared (ordered over unordered), so agreement is not for free.
func TestRabbitMQTopologyPartitions(t *testing.T) {
	t.Parallel()
	u := rabbitVhost(t)
	q := rabbitQueue()
	flags := slices.Clone(orderedPartitions)
	flags[slices.Index(flags, "orders")] = q
	// --node: the one node again, as a second URL of it; each partition is
	// declared on a connection to its home node (transport.Queue.Home).
	code, out, errOut := cli(t, dialRabbitMQ, append([]string{"topology", "--url", u, "--node", u, "--delays", "--apply", "--json"}, flags...)...)
	if code != 0 {
		t.Fatalf("topology: %d\n%s%s", code, out, errOut)
	}
	applied := jsonLines(t, out)
	if !slices.ContainsFunc(applied, func(l string) bool {
		return strings.HasPrefix(l, "queue "+acemq.PartitionName(q, 2)+" ") && strings.Contains(l, "x-single-active-consumer:true")
	}) {
		t.Fatalf("no ordered third partition in\n%s", strings.Join(applied, "\n"))
	}
	tr := &declaring{Transport: rabbitTransport(t, u)}
	if err := serveOnce(t, tr, q, partitionedConfig()); err != nil {
		t.Fatalf("the server refused what topology declared: %v", err)
	}
	if got := tr.declared(); !slices.Equal(got, applied) {
		t.Errorf("the server declared\n%s\ntopology declared\n%s", strings.Join(got, "\n"), strings.Join(applied, "\n"))
	}

	// Applied again with a smaller count: the partition past it is said.
	code, out, errOut = cli(t, dialRabbitMQ, "topology", "--url", u, "--apply", "--queue", q, "--partitions", "2", "--arg", "x-queue-type=quorum", "--arg", "x-queue-leader-locator=balanced")
	if code == 0 || !strings.Contains(errOut, "PRECONDITION_FAILED") && !strings.Contains(errOut, "precondition failed") {
		t.Errorf("declared unordered, without the limit, over what was declared ordered with it: %d\n%s%s", code, out, errOut)
	}
	two := slices.Clone(flags)
	two[slices.Index(two, "3")] = "2"
	code, out, errOut = cli(t, dialRabbitMQ, append([]string{"topology", "--url", u, "--apply"}, two...)...)
	if want := "\n(" + acemq.PartitionName(q, 2) + " exists, 0 messages ready, 0 consumers: a partition past --partitions 2 (of an earlier count): a server with 2 partitions does not consume it)\n"; code != 0 || !strings.HasSuffix(out, want) {
		t.Errorf("topology --partitions 2: %d, want %q at the end of\n%s%s", code, want, out, errOut)
	}

	unordered := rabbitQueue()
	flags[slices.Index(flags, q)] = unordered
	flags = slices.DeleteFunc(flags, func(f string) bool { return f == "--ordered" })
	if code, out, errOut := cli(t, dialRabbitMQ, append([]string{"topology", "--url", u, "--apply"}, flags...)...); code != 0 {
		t.Fatalf("topology: %d\n%s%s", code, out, errOut)
	}
	if err := serveOnce(t, rabbitTransport(t, u), unordered, partitionedConfig()); !errors.Is(err, transport.ErrPreconditionFailed) ||
		!strings.Contains(err.Error(), "x-single-active-consumer") {
		t.Fatalf("an ordered server on unordered partitions: %v, want PRECONDITION_FAILED for x-single-active-consumer", err)
	}
}
