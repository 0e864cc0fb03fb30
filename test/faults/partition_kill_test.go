package faults_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The partitioned queue of TestFaultPartitionLeaderKilled and its load.
const (
	partitionCount     = 4
	partitionKeys      = 24 // keys, each published in sequence by one producer goroutine
	partitionPerKey    = 50 // messages per key
	partitionProducers = 6  // goroutines, two per node
	partitionLimit     = 5  // the partitions' x-delivery-limit
)

// TestFaultPartitionLeaderKilled: a three-node cluster, and a queue of
// four ordered quorum partitions (QueueConfig{Partitions: 4, Ordered:
// true}) whose leaders the server spreads over the nodes (partition i
// declared through node i mod 3, the transport given every node's URL:
// transport.Queue.Home), with the broker's delivery limit and its route into each
// partition's .dlq. Three servers, each connected to a different node,
// serve it; the one connected to the victim node starts first, so that
// it is every partition's single active consumer. Six producer goroutines,
// two on each node, publish 24 keys' messages at a steady pace, each key's
// in sequence (the next once the broker confirmed the last), with the
// key and its sequence number in headers. One in seven messages fails
// once and is retried, after 500 ms in the process (long enough for its
// key's next messages to pass it), republished to its partition; a few
// are dead-lettered or parked by their handler.
//
// Once a quarter is published, the victim, a node other than node 0 (where
// every classic queue lives) that leads a partition, is killed with
// SIGKILL. The partitions it led elect new leaders among the two left,
// every partition loses its active consumer (its server's connection was
// on the victim) and the broker makes another server's consumer active,
// handing it what the dead one held. The producers go on. The victim is
// started again once they are done, as its supervisor would, and the
// queues drain. Every id is accounted for (the FAULT line); lost must be 0.
//
// What ordering holds (the ORDER line, in two views): for each key, the
// order in which its messages ended (the first handler call that did not
// ask for a retry), and the order in which they were first handled
// (whatever the call answered), against the order they were published.
// Within a partition one handler runs at a time, in the order the broker
// delivers, so a key's messages come in publish order except for
//
//   - a retry: the copy goes to the back of the partition, behind the
//     key's later messages (expected: in the ended view, nearly every
//     retried message is late; the first-handled view is not moved);
//   - a redelivery: a consumer that died holding messages returns them to
//     the queue, and the next active consumer takes them first, in their
//     order; a message the dead consumer had handled whose ack was lost
//     comes again (a duplicate, which the FAULT line counts);
//   - a publish the producer had to repeat (the first copy's confirm
//     lost in the election), whose first copy may land after the second.
//
// Any other late message is a defect and fails the test, as do keys whose
// messages that were never retried nor redelivered did not come in
// publish order among themselves, in either view.
func TestFaultPartitionLeaderKilled(t *testing.T) {
	t.Parallel()
	const name = "partition-leader-kill"
	start := time.Now()
	nodes := startCluster(t, name)
	log := testLogger(t)
	q := "faults." + name
	parts := acemq.Partitioned{Queue: q, Count: partitionCount}
	pol := retry.Exponential(3, 500*time.Millisecond, 0).WithJitter(0).WithBrokerWaitThreshold(0)
	cfg := acemq.QueueConfig{
		Partitions:    partitionCount,
		Ordered:       true,
		DeliveryLimit: partitionLimit,
		Prefetch:      8,
		Args:          map[string]any{"x-queue-type": "quorum"},
	}
	newServer := func(h acemq.Handler) *acemq.Server {
		mux := acemq.NewMux()
		mux.Handle(q, h)
		return &acemq.Server{Handler: mux, Retry: pol, PublishTimeout: 5 * time.Second,
			Queues: map[string]acemq.QueueConfig{q: cfg}}
	}
	l := newLedger()

	// A first server, through node 0 and given the others' URLs, declares
	// the partitions (partition i through node i mod 3, the nodes counted
	// in their URLs' sorted order) and their classic
	// queues (.dlq, .parked, through node 0, which survives); it stops
	// again, so that the fleet below chooses the active consumers.
	admin := dial(t, nodes[0].URL, log, rabbitmq.WithURLs(nodes[1].URL, nodes[2].URL))
	first := serve(t, admin, parts.For(""), newServer(l.handler(0)), nil, log)
	polltest.Within(t, 60*time.Second, "the first server consumes every partition", func() bool {
		return consumersOn(admin, parts.Queues()) >= 1
	})
	if err := first.stop(t); err != nil {
		t.Fatalf("Run of the declaring server: %v", err)
	}
	led := leaders(t, nodes[0])
	byNode := map[string][]string{}
	for _, p := range parts.Queues() {
		byNode[led[p]] = append(byNode[led[p]], p)
	}
	var spread []string
	for _, n := range nodes {
		spread = append(spread, fmt.Sprintf("%s leads %v", n.Name, byNode[n.Name]))
	}
	t.Logf("%s: partitions spread by the server: %s", name, strings.Join(spread, "; "))
	homes := slices.SortedFunc(slices.Values(nodes), func(a, b *brokertest.Node) int { return strings.Compare(a.URL, b.URL) })
	for i, p := range parts.Queues() {
		if want := homes[i%len(homes)].Name; led[p] != want {
			t.Errorf("%s: %s is led by %q, want %s (partition %d through the node of the URL %d of %d in sorted order)", name, p, led[p], want, i, i%len(homes)+1, len(homes))
		}
	}
	victim := -1
	for i := 1; i < len(nodes); i++ {
		if len(byNode[nodes[i].Name]) > 0 && (victim < 0 || len(byNode[nodes[i].Name]) > len(byNode[nodes[victim].Name])) {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("%s: node 0 leads every partition: %v", name, led)
	}
	ledByVictim := byNode[nodes[victim].Name]

	// The fleet: a server on each node, the victim's first, each with the
	// others as its fallbacks.
	ol := &orderLog{}
	order := []int{victim}
	for i := range nodes {
		if i != victim {
			order = append(order, i)
		}
	}
	var runs []*running
	for _, i := range order {
		var others []string
		for k := 1; k < len(nodes); k++ {
			others = append(others, nodes[(i+k)%len(nodes)].URL)
		}
		tr := dial(t, nodes[i].URL, log, rabbitmq.WithURLs(others...))
		run := serve(t, tr, parts.For(""), newServer(ol.record(i, l.handler(2*time.Millisecond))), nil, log)
		runs = append(runs, run)
		// A single-active-consumer queue counts only its active consumer:
		// the server itself says when it has subscribed every partition.
		polltest.Within(t, 60*time.Second, fmt.Sprintf("server %d consumes every partition", i), func() bool {
			select {
			case <-run.srv.Ready():
				return true
			default:
				return false
			}
		})
	}

	js := keyedJobs(name, partitionKeys, partitionPerKey)
	perPartition := make([][]job, partitionCount)
	for _, j := range js {
		p := acemq.PartitionOf(j.key, partitionCount)
		perPartition[p] = append(perPartition[p], j.job)
	}
	var sizes []int
	for _, p := range perPartition {
		sizes = append(sizes, len(p))
	}
	t.Logf("%s: %d messages over the partitions %v; node %d (%s) leads %v",
		name, len(js), sizes, victim, nodes[victim].Name, ledByVictim)

	var pubs []transport.Transport
	for i := range nodes {
		pubs = append(pubs, dial(t, nodes[i].URL, log, rabbitmq.WithURLs(nodes[(i+1)%3].URL, nodes[(i+2)%3].URL)))
	}
	kp := &keyedPublish{parts: parts, stats: &publishStats{}, attempts: map[string]int{}}
	published := make(chan []job, 1)
	go func() { published <- kp.run(t, pubs, js, partitionProducers, 40*time.Millisecond) }()

	// A quarter in: finding the victim's pid (rabbitmqctl) takes a second
	// or two more on a loaded machine.
	polltest.Within(t, 60*time.Second, "a quarter published and the handlers busy", func() bool {
		return kp.confirmed.Load() >= int64(len(js)/4) && l.totalCalls() >= len(js)/8
	})
	// Which consumers the broker made active, and at what prefetch, under
	// load.
	t.Logf("%s: consumers (queue, tag, prefetch, active):\n%s", name,
		nodes[0].Ctl(t, "list_consumers", "queue_name", "consumer_tag", "prefetch_count", "active", "--no-table-headers"))
	killed := time.Now()
	nodes[victim].Kill(t)
	ol.markKill()
	t.Logf("%s: node %d killed %s after the start, with %d of %d published and %d handler calls made",
		name, victim, killed.Sub(start).Round(time.Millisecond), kp.confirmed.Load(), len(js), l.totalCalls())
	var elected map[string]string
	polltest.Within(t, 60*time.Second, "new leaders for "+strings.Join(ledByVictim, ", "), func() bool {
		elected = leaders(t, nodes[0])
		for _, p := range ledByVictim {
			if elected[p] == "" || elected[p] == nodes[victim].Name {
				return false
			}
		}
		return true
	})
	var now []string
	for _, p := range ledByVictim {
		now = append(now, p+" by "+elected[p])
	}
	t.Logf("%s: %s after the kill, led: %s; %d published", name, time.Since(killed).Round(time.Millisecond), strings.Join(now, ", "), kp.confirmed.Load())
	sent := <-published
	t.Logf("%s: producers done %s after the kill: %s", name, time.Since(killed).Round(time.Millisecond), kp.stats)
	nodes[victim].Restart(t)
	t.Logf("%s: node %d started again %s after the kill", name, victim, time.Since(killed).Round(time.Millisecond))

	sinks := make([]*sink, partitionCount)
	sentBy := make([][]job, partitionCount)
	for i := range sinks {
		sinks[i] = newSink(nodes[0].URL, acemq.PartitionName(q, i))
	}
	partOf := map[string]int{}
	for _, j := range js {
		partOf[j.ID] = acemq.PartitionOf(j.key, partitionCount)
	}
	for _, j := range sent {
		sentBy[partOf[j.ID]] = append(sentBy[partOf[j.ID]], j)
	}
	if !polltest.Until(90*time.Second, func() bool {
		for i, sk := range sinks {
			if !sk.settled(l, sentBy[i])() {
				return false
			}
		}
		return true
	}) {
		t.Errorf("%s: not settled within 90s of node %d's return; the queues holding messages: %s", name, victim, holdingAll(t, nodes[0]))
	}
	settled := time.Since(killed)
	for _, r := range runs {
		if err := r.stop(t); err != nil && !errors.Is(err, acemq.ErrServerClosed) {
			t.Errorf("Run: %v", err)
		}
	}
	held, _ := holding(t, nodes[0], parts.Queues())
	if len(pol.BrokerRungs()) != 0 {
		t.Fatalf("%s: the policy waits on rungs, which collectPartition does not read", name)
	}
	tl := sinks[0].collectPartition(t, name, sentBy[0], l.acceptedCopy())
	for i := 1; i < partitionCount; i++ {
		tl.merge(sinks[i].collectPartition(t, name, sentBy[i], nil))
	}
	r := tl.report(t)
	calls, afterKill, byServer := ol.callStats()
	t.Logf("%s: settled %s after the kill, %s after the start; %d handler calls (%d after the kill), %d held by a partition waiting to dead-letter, %d still queued",
		name, settled.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), calls, afterKill, held, r.queued)
	if held != 0 {
		t.Errorf("%s: %d messages held by a partition, dead-lettered and not yet confirmed by its .dlq", name, held)
	}
	t.Logf("%s: handler calls by server, partition and side of the kill: %v", name, byServer)
	publishes := kp.attemptsCopy()
	reportOrder(t, name, ol.judge(viewEnded, publishes), ol.judge(viewFirst, publishes))
}

// keyedJob is a job with its key and its place in the key's sequence.
type keyedJob struct {
	job
	key string
	seq int
}

// keyedJobs are keys × perKey jobs, keys interleaved: one in seven fails
// once, one in forty is parked, one in fifty rejected, the others
// accepted at once.
func keyedJobs(prefix string, keys, perKey int) []keyedJob {
	out := make([]keyedJob, 0, keys*perKey)
	for seq := range perKey {
		for k := range keys {
			g := len(out)
			j := keyedJob{job: job{ID: fmt.Sprintf("%s-k%02d-%03d", prefix, k, seq)}, key: fmt.Sprintf("customer-%d", k), seq: seq}
			switch {
			case g%40 == 11:
				j.Park = true
			case g%50 == 19:
				j.Reject = true
			case g%7 == 3:
				j.FailUntil = 2
			}
			out = append(out, j)
		}
	}
	return out
}

// keyedPublish publishes keyed jobs to their partitions, each key's in
// sequence.
type keyedPublish struct {
	parts     acemq.Partitioned
	stats     *publishStats
	confirmed atomic.Int64
	mu        sync.Mutex
	attempts  map[string]int // publish calls per id
}

// run publishes js from workers goroutines, goroutine w on pubs[w%len]
// owning the keys whose index is w modulo workers: each publishes its
// keys' messages in their order, each retried until the broker confirms
// it before the next, one per pace. It returns the jobs confirmed,
// failing the test if some never were.
func (kp *keyedPublish) run(tb testing.TB, pubs []transport.Transport, js []keyedJob, workers int, pace time.Duration) []job {
	tb.Helper()
	deadline := time.Now().Add(120 * time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var confirmed []job
	for w := range workers {
		pub := &acemq.Publisher{Transport: pubs[w%len(pubs)], Mandatory: true}
		mine := slices.DeleteFunc(slices.Clone(js), func(j keyedJob) bool {
			var k int
			_, _ = fmt.Sscanf(j.key, "customer-%d", &k)
			return k%workers != w
		})
		wg.Go(func() {
			for _, j := range mine {
				out := acemq.Outgoing{RoutingKey: kp.parts.For(j.key), ID: j.ID, Body: body(j.job), ContentType: "application/json",
					Headers: map[string]any{headerKey: j.key, headerSeq: int64(j.seq)}}
				if untilConfirmed(deadline, kp.stats, func(ctx context.Context) error {
					kp.mu.Lock()
					kp.attempts[j.ID]++
					kp.mu.Unlock()
					_, err := pub.Publish(ctx, out)
					return err
				}) != nil {
					return // the key's later messages would be out of its order
				}
				mu.Lock()
				confirmed = append(confirmed, j.job)
				mu.Unlock()
				kp.confirmed.Add(1)
				time.Sleep(pace)
			}
		})
	}
	wg.Wait()
	if len(confirmed) != len(js) {
		tb.Errorf("only %d of %d messages were ever confirmed: %s", len(confirmed), len(js), kp.stats)
	}
	return confirmed
}

func (kp *keyedPublish) attemptsCopy() map[string]int {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	out := make(map[string]int, len(kp.attempts))
	for k, v := range kp.attempts {
		out[k] = v
	}
	return out
}

// consumersOn is the fewest consumers any of qs has, as tr sees them (on
// a single-active-consumer queue, the active one only); -1 when one
// cannot be read.
func consumersOn(tr transport.Transport, qs []string) int {
	least := -1
	for _, name := range qs {
		info, err := tr.Inspect(context.Background(), name)
		if err != nil {
			return -1
		}
		if least < 0 || info.Consumers < least {
			least = info.Consumers
		}
	}
	return least
}
