package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// orderedPartitions are the flags of the partitioned queue of
// docs/operators.md, and partitionedConfig its QueueConfig.
var orderedPartitions = []string{"--queue", "orders", "--partitions", "3", "--ordered", "--arg", "x-queue-type=quorum",
	"--arg", "x-queue-leader-locator=balanced", "--delivery-limit", "5", "--attempts", "3", "--initial", "40s", "--fixed"}

func partitionedConfig() acemq.QueueConfig {
	return acemq.QueueConfig{Partitions: 3, Ordered: true, DeliveryLimit: 5, Retry: retry.Fixed(3, 40*time.Second),
		Args: map[string]any{"x-queue-type": "quorum", "x-queue-leader-locator": "balanced"}}
}

// TestTopologyPartitionsDryRun: a partitioned queue's declarations are
// each partition's, under its name, each with its own dead-letter route,
// rung and binding, and single active consumer when ordered; none for the
// logical queue itself.
func TestTopologyPartitionsDryRun(t *testing.T) {
	t.Parallel()
	code, out, errOut := cli(t, noBroker, append([]string{"topology"}, orderedPartitions...)...)
	if code != 0 {
		t.Fatalf("status %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"a consumer of orders, in 3 partitions (orders.p0 .. orders.p2), declares (dry run: --apply declares them):\nexchange  acemq.retry  direct durable\nexchange  acemq.dlx    direct durable\n\norders.p0, partition 0 of 3:\n",
		"\norders.p1, partition 1 of 3:\nqueue    orders.p1            durable x-dead-letter-exchange=acemq.dlx x-dead-letter-routing-key=orders.p1 x-dead-letter-strategy=at-least-once x-delivery-limit=5 x-overflow=reject-publish x-queue-leader-locator=balanced x-queue-type=quorum x-single-active-consumer=true\n" +
			"queue    orders.p1.dlq        durable\nqueue    orders.p1.parked     durable\n" +
			"queue    orders.p1.retry.40s  durable x-dead-letter-exchange=acemq.retry x-dead-letter-routing-key=orders.p1 x-message-ttl=40000\n" +
			"binding  orders.p1            to exchange acemq.retry with key orders.p1\n" +
			"binding  orders.p1.dlq        to exchange acemq.dlx with key orders.p1\n" +
			"binding  orders.p1.parked     to exchange acemq.dlx with key orders.p1.parked\n\norders.p2, partition 2 of 3:\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "queue    orders ") || strings.Contains(out, "orders.p3") || strings.Count(out, "exchange  acemq.retry") != 1 {
		t.Errorf("declares the logical queue, a fourth partition, or the exchanges more than once:\n%s", out)
	}

	// As JSON: the logical queue, its partitions in order, and their
	// declarations, the exchanges once.
	code, out, _ = cli(t, noBroker, append([]string{"topology", "--json"}, orderedPartitions...)...)
	var got topologyOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Queue != "orders" || !got.Ordered || got.Applied ||
		fmt.Sprint(got.Partitions) != "[{orders.p0 0} {orders.p1 1} {orders.p2 2}]" || len(got.Queues) != 3*4 || len(got.Exchanges) != 2 ||
		got.Queues[4].Name != "orders.p1" || got.Queues[4].Args["x-single-active-consumer"] != true {
		t.Errorf("%d %v\n%s", code, err, out)
	}

	// With the delay queues: each partition's binding to them, in its group,
	// and the delay queues once, after.
	code, out, _ = cli(t, noBroker, "topology", "--queue", "orders", "--partitions", "2", "--attempts", "3", "--initial", "1m", "--on-delay-queues")
	for _, want := range []string{
		"binding  orders.p0.parked  to exchange acemq.dlx with key orders.p0.parked\nbinding  orders.p0         to exchange acemq.delay.v1.deliver with key " + strings.Repeat("*.", 28) + "orders.p0\n\norders.p1, partition 1 of 2:\n",
		"\nthe delay queues, one set per vhost:\nexchange  acemq.delay.v1.undeliverable     fanout durable\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status %d, missing %q in\n%s", code, want, out)
		}
	}
}

// TestTopologyPartitionsServerAgrees: what topology --delays --apply
// declares for a partitioned queue is what a Server with its QueueConfig
// declares, not one queue, argument, rung or binding more or less, and the
// Server starts on it. (A Server declares the delay queues, and binds its
// queues to them, whatever its policy: so --delays.)
func TestTopologyPartitionsServerAgrees(t *testing.T) {
	t.Parallel()
	delays := partitionedConfig()
	delays.Retry = retry.Fixed(3, time.Minute).WithDelayQueues(true)
	for _, c := range []struct {
		name  string
		flags []string
		cfg   acemq.QueueConfig
	}{
		{"rungs", append([]string{"--delays"}, orderedPartitions...), partitionedConfig()},
		{"delay queues", []string{"--queue", "orders", "--partitions", "3", "--ordered", "--arg", "x-queue-type=quorum",
			"--arg", "x-queue-leader-locator=balanced", "--delivery-limit", "5", "--attempts", "3", "--initial", "1m", "--fixed", "--on-delay-queues"}, delays},
		{"unordered, no limit", []string{"--delays", "--queue", "orders", "--partitions", "4"}, acemq.QueueConfig{Partitions: 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := memory.New()
			dial := func(context.Context, string) (transport.Transport, error) { return b.Connect(), nil }
			code, out, errOut := cli(t, dial, append([]string{"topology", "--url", "amqp://x", "--apply", "--json"}, c.flags...)...)
			if code != 0 {
				t.Fatalf("status %d\n%s%s", code, out, errOut)
			}
			applied := jsonLines(t, out)
			for i := range c.cfg.Partitions {
				if _, ok := b.Queue(acemq.PartitionName("orders", i)); !ok {
					t.Errorf("partition %d was not declared", i)
				}
			}
			conn := &declaring{Transport: b.Connect()}
			defer conn.Close()
			if err := serveOnce(t, conn, "orders", c.cfg); err != nil {
				t.Fatalf("the server refused what topology declared: %v", err)
			}
			if got := conn.declared(); !slices.Equal(got, applied) {
				t.Errorf("the server declared\n%s\ntopology declared\n%s", strings.Join(got, "\n"), strings.Join(applied, "\n"))
			}
		})
	}
}

// TestTopologyPartitionsDisagree: the test above can fail: a partitioned
// queue declared unordered is refused to a Server that declares it
// ordered, as RabbitMQ refuses it.
func TestTopologyPartitionsDisagree(t *testing.T) {
	t.Parallel()
	b := memory.New()
	dial := func(context.Context, string) (transport.Transport, error) { return b.Connect(), nil }
	unordered := slices.DeleteFunc(slices.Clone(orderedPartitions), func(f string) bool { return f == "--ordered" })
	if code, out, errOut := cli(t, dial, append([]string{"topology", "--url", "amqp://x", "--apply"}, unordered...)...); code != 0 {
		t.Fatalf("status %d\n%s%s", code, out, errOut)
	}
	conn := b.Connect()
	defer conn.Close()
	if err := serveOnce(t, conn, "orders", partitionedConfig()); !errors.Is(err, transport.ErrPreconditionFailed) {
		t.Fatalf("Run: %v, want a precondition failed", err)
	}
}

// TestTopologyPartitionsMistakes: settings a Server would refuse are
// refused before anything is declared, with the Server's reason.
func TestTopologyPartitionsMistakes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--partitions", "2"}, "--queue is required"},
		{[]string{"--delays", "--ordered"}, "give --queue too"},
		{[]string{"--queue", "orders", "--partitions", "-1"}, "--partitions -1: zero (one queue) or above"},
		{[]string{"--queue", "orders", "--partitions", "5000"}, "--partitions 5000: acemq's tools look for at most 4096 partitions"},
		{[]string{"--queue", "orders", "--partitions", "2", "--ordered"}, "--ordered: Ordered needs a quorum queue (Args x-queue-type quorum); this one is classic"},
		{[]string{"--queue", "orders", "--ordered", "--arg", "x-queue-type=quorum", "--arg", "x-single-active-consumer=false"}, "--ordered: Ordered, and Args sets x-single-active-consumer to false"},
		{[]string{"--queue", "orders", "--partitions", "2", "--delivery-limit", "5"}, "--delivery-limit: DeliveryLimit needs a quorum queue"},
		{[]string{"--queue", "orders", "--delivery-limit", "-2", "--arg", "x-queue-type=quorum"}, "--delivery-limit: DeliveryLimit -2; it must be zero (none declared) or above"},
		{[]string{"--queue", "orders", "--delivery-limit", "5", "--arg", "x-queue-type=quorum", "--arg", "x-overflow=drop-head"}, "--delivery-limit: DeliveryLimit declares x-overflow itself"},
	} {
		code, out, errOut := cli(t, noBroker, append([]string{"topology"}, c.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: status %d, want %q in\n%s%s", c.args, code, c.want, out, errOut)
		}
	}
}

// TestTopologyPartitionsStrays: --apply says the queues another count
// declared, which a server with this count does not consume, and what
// they hold: the queue unpartitioned, a partition past the count, or
// partitions when the queue is declared unpartitioned.
func TestTopologyPartitionsStrays(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders") // orders, unpartitioned
	apply := func(flags ...string) string {
		t.Helper()
		code, out, errOut := cli(t, dial, append([]string{"topology", "--url", "amqp://x", "--apply", "--queue", "orders"}, flags...)...)
		if code != 0 {
			t.Fatalf("%v: status %d\n%s%s", flags, code, out, errOut)
		}
		return out
	}
	if out := apply("--partitions", "3"); !strings.HasSuffix(out, "\n(orders exists, 0 messages ready, 0 consumers: the queue unpartitioned: a server with 3 partitions does not consume it)\n") {
		t.Errorf("the unpartitioned queue is not said:\n%s", out)
	}
	conn := b.Connect()
	defer conn.Close()
	if _, err := conn.Publish(context.Background(), transport.Publishing{RoutingKey: "orders.p2", Body: []byte("left behind")}); err != nil {
		t.Fatal(err)
	}
	if !b.DeleteQueue("orders") {
		t.Fatal("orders was not there")
	}
	out := apply("--partitions", "2")
	if !strings.HasSuffix(out, "\n(orders.p2 exists, 1 message ready, 0 consumers: a partition past --partitions 2 (of an earlier count): a server with 2 partitions does not consume it)\n") ||
		strings.Contains(out, "(orders exists") || strings.Contains(out, "(orders.p1 exists") {
		t.Errorf("the third partition is not said, or more is:\n%s", out)
	}
	code, out, _ := cli(t, dial, "topology", "--url", "amqp://x", "--apply", "--json", "--queue", "orders")
	var got topologyOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Strays) != 3 || got.Strays[2] != (strayOut{Queue: "orders.p2", Messages: 1,
		Why: "a partition of the queue: a server of the queue unpartitioned does not consume it (is --partitions missing?)"}) {
		t.Errorf("%d %v\n%s", code, err, out)
	}
	// A dry run looks for nothing.
	if code, out, _ := cli(t, noBroker, "topology", "--queue", "orders", "--partitions", "2"); code != 0 || strings.Contains(out, "exists") {
		t.Errorf("status %d\n%s", code, out)
	}
}

// TestTopologyNodes: --node's URLs reach the dialer (which gives them to
// the transport, to declare each partition through its own node), they
// go with --apply only, and their passwords are not printed.
func TestTopologyNodes(t *testing.T) {
	t.Parallel()
	b := memory.New()
	var got []string
	dial := func(ctx context.Context, _ string) (transport.Transport, error) {
		got = nodesFrom(ctx)
		return b.Connect(), nil
	}
	const node2, node3 = "amqp://ops:n0de-s3cret@rabbit-2:5672/", "amqp://ops:n0de-s3cret@rabbit-3:5672/"
	code, out, errOut := cli(t, dial, "topology", "--url", "amqp://ops:n0de-s3cret@rabbit-1:5672/", "--node", node2, "--node", node3,
		"--apply", "--queue", "orders", "--partitions", "3", "--json")
	if code != 0 || !slices.Equal(got, []string{node2, node3}) || strings.Contains(out+errOut, "n0de-s3cret") || !strings.Contains(out, `"home": 3`) {
		t.Errorf("status %d, nodes %q\n%s%s", code, got, out, errOut)
	}
	code, out, errOut = cli(t, noBroker, "topology", "--node", node2, "--queue", "orders", "--partitions", "3")
	if code != exitUsage || !strings.Contains(errOut, "--node goes with --apply") || strings.Contains(out+errOut, "n0de-s3cret") {
		t.Errorf("status %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, noBroker, "topology", "--node", "http://ops:n0de-s3cret@rabbit-2/", "--apply", "--queue", "orders")
	if code != exitUsage || strings.Contains(out+errOut, "n0de-s3cret") {
		t.Errorf("a node that is no AMQP URL: status %d\n%s%s", code, out, errOut)
	}
}
