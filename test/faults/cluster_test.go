package faults_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// TestFaultClusterLeaderKilled: a three-node cluster on this machine, the
// source queue a quorum queue led by node 1, the consumer and the producer
// connected to node 1 with nodes 2 and 0 as their other URLs. Node 1 is
// killed with SIGKILL under load: both move to a surviving node while the
// queue elects a new leader, and nothing is lost.
//
// During the election RabbitMQ nacks publishes to the queue, and a channel
// opened in it can go on nacking (3.10.8): a server that took the first
// nack of a retry's copy as final rejected the original, and a producer's
// confirm channel nacked thousands of publishes in a row. Now a nacked copy
// is published again, and a nack retires its channel.
//
// The waits are all in the process. A wait on a rung ends in the rung's
// dead-lettering into the queue, which RabbitMQ does at most once from a
// classic queue: a rung message that expires while the queue has no
// leader is dropped by the broker (4 of 400 in a run of this scenario with
// rungs). docs/operators.md says so.
func TestFaultClusterLeaderKilled(t *testing.T) {
	t.Parallel()
	const name = "cluster-leader-killed"
	nodes := startCluster(t, name)
	log := testLogger(t)
	q := "faults." + name
	quorum := map[string]any{"x-queue-type": "quorum"}
	pol := retry.Exponential(4, 100*time.Millisecond, 0).WithJitter(0).WithBrokerWaitThreshold(0)
	// The quorum queue is declared through node 1, which makes it its
	// leader; the rest of the topology through node 0, where the classic
	// queues (.dlq, .parked) then live.
	if err := raw(nodes[1].URL, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table(quorum))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	admin := dial(t, nodes[0].URL, log)
	if err := admin.Declare(context.Background(), acemq.Topology(q, pol, quorum)); err != nil {
		t.Fatal(err)
	}
	if got := leader(t, nodes[0], q); got != nodes[1].Name {
		t.Fatalf("the leader of %s is %q, want %s", q, got, nodes[1].Name)
	}

	others := rabbitmq.WithURLs(nodes[2].URL, nodes[0].URL)
	srvTr := dial(t, nodes[1].URL, log, others)
	pubTr := dial(t, nodes[1].URL, log, others)
	l := newLedger()
	run := serve(t, srvTr, q, &acemq.Server{Retry: pol, PublishTimeout: 5 * time.Second,
		Queues: map[string]acemq.QueueConfig{q: {Args: quorum}}}, l.handler(2*time.Millisecond), log)
	js := jobs(name, outageMessages)
	stats := &publishStats{}
	published := make(chan []job, 1)
	go func() { published <- publishAll(t, pubTr, q, js, 4, 40*time.Millisecond, stats) }()
	polltest.Within(t, 30*time.Second, "the handler is busy", func() bool { return l.totalCalls() >= len(js)/8 })
	nodes[1].Kill(t)
	sent := <-published
	t.Logf("%s: producer: %s", name, stats)
	t.Logf("%s: the leader of %s is now %s", name, q, leader(t, nodes[0], q))
	sk := newSink(nodes[0].URL, q)
	if !polltest.Until(60*time.Second, sk.settled(l, sent)) {
		t.Errorf("%s: not settled within 60s", name)
	}
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	sk.collect(t, name, sent, l.acceptedCopy(), pol).report(t)
}

// leader is the node leading quorum queue q, as node n sees it.
func leader(t *testing.T, n *brokertest.Node, q string) string {
	t.Helper()
	for _, line := range strings.Split(n.Ctl(t, "list_queues", "name", "leader", "--no-table-headers"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == q {
			return f[1]
		}
	}
	return ""
}
