package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// Environment of a TestHelperQuorumConsumer process.
const (
	envQuorumChild = "ACEMQ_FAULTS_QUORUM_CHILD" // "1" in the child
	envQuorumURLs  = "ACEMQ_FAULTS_QUORUM_URLS"  // the nodes to dial, in order, space-separated
)

// The broker's delivery limit on the work queue of
// TestFaultClusterQuorumLimit: a copy is delivered limitDeliveries + 1
// times before the broker dead-letters it.
const limitDeliveries = 5

// quorumJob is a job whose body may also say that it is poison: the
// consumer that takes it crashes (os.Exit) before it can settle it, every
// time, as a handler that runs out of memory or hits a cgo crash would.
type quorumJob struct {
	job
	Poison bool `json:"poison,omitempty"`
}

// quorumJobs are n jobs: one in seventy-five poison, one in ten accepted on
// its second attempt (a retry waiting in the process, a republished copy
// whose delivery count starts afresh), the others accepted at once.
func quorumJobs(prefix string, n int) []quorumJob {
	out := make([]quorumJob, n)
	for i := range out {
		j := quorumJob{job: job{ID: fmt.Sprintf("%s-%04d", prefix, i)}}
		switch {
		case i%75 == 17:
			j.Poison = true
		case i%10 == 3:
			j.FailUntil = 2
		}
		out[i] = j
	}
	return out
}

// accounting is the job as the tally reads it: a poison is expected in the
// .dlq, as a job that always fails is.
func (j quorumJob) accounting() job {
	a := j.job
	a.Always = j.Poison
	return a
}

// quorumLimitPolicy: three attempts, every wait in the process, so that
// the only thing that spends a copy's delivery budget is a consumer that
// went away while holding it.
func quorumLimitPolicy() retry.Policy {
	return retry.Exponential(3, 20*time.Millisecond, 0).WithJitter(0).WithBrokerWaitThreshold(0)
}

// quorumLimitConfig is the work queue as every consumer declares it: a
// quorum queue with the broker's delivery limit and its route into the
// .dlq, one message at a time, so that a crash returns only the message
// that caused it (docs/operators.md, "What the limit counts for acemq").
func quorumLimitConfig() acemq.QueueConfig {
	return acemq.QueueConfig{
		Args:          map[string]any{"x-queue-type": "quorum"},
		DeliveryLimit: limitDeliveries,
		Prefetch:      1,
		Concurrency:   1,
	}
}

// TestFaultClusterQuorumLimit: a three-node cluster, the work queue a
// quorum queue declared by the consumer with QueueConfig.DeliveryLimit,
// through node 1, which so leads it. Three consumer processes (this test
// binary again, in TestHelperQuorumConsumer), restarted whenever one ends
// as a supervisor would, take 300 messages from a producer; four of them
// are poison, and each consumer that takes one exits on the spot. The test
// also kills consumers with SIGKILL four times while they handle
// messages, and node 1 once. Each poison goes back to the queue with every
// crash, until the broker's limit moves it into the .dlq (at least once,
// through acemq.dlx), where it must read back with the broker's reason;
// everything else must be handled, and nothing be lost. Node 1 is killed
// while a poison is half way through its deliveries: the new leader
// carries the count on (the handlers see x-delivery-count 0 to 5 on each
// poison, never a seventh delivery).
//
// The consumers take one message at a time (Prefetch 1): a crash then
// returns only the message in hand, and a message that was merely there
// when a poison crashed its consumer does not spend its budget with it.
// A consumer killed by the test returns the one message it was handling,
// one delivery of its five spare ones.
//
// Node 1 is not started again: the .dlq, the at-least-once route's
// target, is a classic queue on node 0, so the 3.10.8 stall of a
// dead-letter worker whose target queue was led by the lost node
// (TestFaultClusterDelaysLeaderKilled) does not arise, and the two
// remaining nodes are a quorum.
func TestFaultClusterQuorumLimit(t *testing.T) {
	t.Parallel()
	const name = "cluster-quorum-limit"
	start := time.Now()
	nodes := startCluster(t, name)
	log := testLogger(t)
	q := "faults." + name
	pol := quorumLimitPolicy()

	// The classic queues (.dlq, .parked) through node 0, which survives;
	// the work queue is left to the first consumer, on node 1.
	top := acemq.Topology(q, pol, nil)
	top.Queues = slices.DeleteFunc(top.Queues, func(x transport.Queue) bool { return x.Name == q })
	top.Bindings = slices.DeleteFunc(top.Bindings, func(b transport.Binding) bool { return b.Queue == q })
	admin := dial(t, nodes[0].URL, log)
	if err := admin.Declare(context.Background(), top); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "ledger")
	urls := [][]string{
		{nodes[1].URL, nodes[2].URL, nodes[0].URL},
		{nodes[2].URL, nodes[0].URL, nodes[1].URL},
		{nodes[0].URL, nodes[1].URL, nodes[2].URL},
	}
	fl := &fleet{t: t, queue: q, ledger: path}
	defer fl.stop()
	t.Cleanup(func() {
		if t.Failed() {
			fl.showLast(3)
		}
	})
	fl.run(urls[0])
	polltest.Within(t, 30*time.Second, "the first consumer consumes "+q, func() bool {
		info, err := admin.Inspect(context.Background(), q)
		return err == nil && info.Consumers > 0
	})
	if got := leader(t, nodes[0], q); got != nodes[1].Name {
		t.Fatalf("the leader of %s is %q, want %s", q, got, nodes[1].Name)
	}
	args := queueArguments(t, nodes[0], q)
	for _, want := range []string{
		fmt.Sprintf(`{"x-delivery-limit",%d}`, limitDeliveries),
		`{"x-dead-letter-exchange","acemq.dlx"}`,
		fmt.Sprintf(`{"x-dead-letter-routing-key","%s"}`, q),
		`{"x-dead-letter-strategy","at-least-once"}`,
		`{"x-overflow","reject-publish"}`,
	} {
		if !strings.Contains(args, want) {
			t.Errorf("%s is declared with %s, which lacks %s", q, args, want)
		}
	}
	fl.run(urls[1])
	fl.run(urls[2])

	qjs := quorumJobs(name, 300)
	var poisons []string
	for _, j := range qjs {
		if j.Poison {
			poisons = append(poisons, j.ID)
		}
	}
	pubTr := dial(t, nodes[1].URL, log, rabbitmq.WithURLs(nodes[2].URL, nodes[0].URL))
	stats := &publishStats{}
	published := make(chan []job, 1)
	var confirmed atomic.Int64
	go func() {
		published <- publishQuorumJobs(t, pubTr, q, qjs, 2, 60*time.Millisecond, stats, &confirmed)
	}()

	// The faults come as the consumers make progress: a consumer killed at
	// 40 and 80 acceptances; node 1 after 120, once a poison is half way
	// through its deliveries, so that the new leader has to carry its
	// count on; then a consumer 15 and 30 acceptances later.
	innocents := len(qjs) - len(poisons)
	for _, at := range []int{40, 80} {
		polltest.Within(t, 120*time.Second, fmt.Sprintf("%d acceptances", at), func() bool {
			return len(readLedger(t, path)) >= at
		})
		fl.killOne(t, name, at)
	}
	var midway string
	polltest.Within(t, 120*time.Second, "120 acceptances and a poison half way", func() bool {
		if len(readLedger(t, path)) < 120 {
			return false
		}
		for id, counts := range readPoisons(t, path) {
			if n := len(counts); n >= 2 && n < limitDeliveries {
				midway = fmt.Sprintf("%s delivered %d times", id, n)
				return true
			}
		}
		return false
	})
	killed := time.Now()
	nodes[1].Kill(t)
	at := len(readLedger(t, path))
	t.Logf("%s: node 1 killed %s after the start, at %d acceptances, with %d of %d published and poison %s",
		name, killed.Sub(start).Round(time.Millisecond), at, confirmed.Load(), len(qjs), midway)
	for _, later := range []int{min(at+15, innocents-10), min(at+30, innocents-5)} {
		polltest.Within(t, 120*time.Second, fmt.Sprintf("%d acceptances", later), func() bool {
			return len(readLedger(t, path)) >= later
		})
		fl.killOne(t, name, later)
	}
	sent := <-published
	t.Logf("%s: producer: %s", name, stats)
	t.Logf("%s: the leader of %s is now %s", name, q, leader(t, nodes[0], q))

	sk := newSink(nodes[0].URL, q)
	dlq := &reasons{by: map[string][]string{}}
	accepted := func() *ledger { return &ledger{accepted: readLedger(t, path)} }
	if !polltest.Until(120*time.Second, func() bool {
		dlq.poll(sk)
		return sk.settled(accepted(), sent)()
	}) {
		t.Errorf("%s: not settled within 120s of the last fault; the queues holding messages: %s", name, holdingAll(t, nodes[0]))
	}
	settled := time.Since(killed)
	fl.stop()
	dlq.poll(sk)
	tl := sk.collect(t, name, sent, readLedger(t, path), pol)
	t.Logf("%s: consumers: %s; settled %s after node 1 was killed", name, fl, settled.Round(time.Millisecond))
	seen := readPoisons(t, path)
	t.Logf("%s: poison deliveries seen by a handler, with the x-delivery-count each came with: %v", name, seen)
	r := tl.report(t)
	if r.lost != 0 {
		return
	}

	// Each poison in the .dlq was put there by the broker, past its limit,
	// and reads back with the broker's reason; nothing else is there.
	for _, id := range poisons {
		rs := dlq.by[id]
		if len(rs) == 0 {
			t.Errorf("%s: poison %s is not in %s", name, id, acemq.DeadLetterQueue(q))
		}
		for _, reason := range rs {
			if !strings.Contains(reason, "delivery limit") || !strings.Contains(reason, "(delivery_limit)") {
				t.Errorf("%s: poison %s reads back from %s with the reason %q, want the broker's delivery limit", name, id, acemq.DeadLetterQueue(q), reason)
			}
		}
	}
	// The broker's limit is count > limit: a poison reaches a handler at
	// most limit + 1 times (fewer when a delivery died with a connection
	// before the handler saw it), a node loss included.
	for id, counts := range seen {
		if len(counts) > limitDeliveries+1 {
			t.Errorf("%s: poison %s reached a handler %d times (x-delivery-count %v), past the limit of %d", name, id, len(counts), counts, limitDeliveries)
		}
	}
	if len(dlq.by) != len(poisons) {
		t.Errorf("%s: %s holds %d ids, want the %d poisons: %v", name, acemq.DeadLetterQueue(q), len(dlq.by), len(poisons), dlq.by)
	}
	if len(poisons) > 0 && len(dlq.by[poisons[0]]) > 0 {
		t.Logf("%s: a poison reads back from %s: %s", name, acemq.DeadLetterQueue(q), dlq.by[poisons[0]][0])
	}
}

// publishQuorumJobs is publishAll for quorumJobs: each one's body is the
// job with its poison mark, which the tally does not see.
func publishQuorumJobs(tb testing.TB, tr transport.Transport, queue string, qjs []quorumJob, workers int, pace time.Duration, stats *publishStats, confirmedN *atomic.Int64) []job {
	tb.Helper()
	js := make([]job, len(qjs))
	for i, q := range qjs {
		js[i] = q.accounting()
	}
	return publishEach(tb, tr, js, workers, pace, stats, confirmedN, func(i int, j job) acemq.Outgoing {
		b, _ := json.Marshal(qjs[i])
		return acemq.Outgoing{RoutingKey: queue, ID: j.ID, Body: b, ContentType: "application/json"}
	})
}

// poisonExit is the exit code of a consumer that took a poison.
const poisonExit = 3

// readPoisons reads the poison deliveries the consumers recorded: by id,
// the x-delivery-count of each.
func readPoisons(t *testing.T, path string) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var id string
		var n int
		if _, err := fmt.Sscanf(sc.Text(), "poison %s %d", &id, &n); err == nil {
			out[id] = append(out[id], n)
		}
	}
	return out
}

// reasons is what the .dlq's messages read back as (Envelope.Error), by
// id, taken as the sink takes them.
type reasons struct {
	by map[string][]string
}

// poll drains the .dlq into sk's count, keeping each message's reason,
// and then lets sk take the rest as it does.
func (r *reasons) poll(sk *sink) {
	sk.mu.Lock()
	_ = raw(sk.url, func(ch *amqp.Channel) error {
		for {
			d, ok, err := ch.Get(acemq.DeadLetterQueue(sk.queue), false)
			if err != nil || !ok {
				return err
			}
			id := deliveryID(d)
			sk.dlq[id]++
			env := acemq.EnvelopeOf(transport.Delivery{Queue: sk.queue, Headers: plainTable(d.Headers)})
			reason := env.Error
			if _, own := d.Headers[acemq.HeaderError]; own {
				reason = "x-acemq-error, the library's: " + reason
			}
			r.by[id] = append(r.by[id], reason)
			if err := d.Ack(false); err != nil {
				return err
			}
		}
	})
	sk.mu.Unlock()
	sk.poll()
}
