package faults_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// TestFaultClusterDelaysLeaderKilled is TestFaultClusterLeaderKilled with
// every message waiting in the broker on the delay queues: the producer
// schedules each one (1 to 8 s), the handler fails its first attempt (a
// third of them their second too, one in twenty-five every attempt), and
// every retry waits on the delay queues (OnDelayQueues, threshold 500 ms).
// Node 1 leads the work queue and every level queue and is killed with
// SIGKILL under load, while messages wait on the levels, and started again
// 8 s later, as its supervisor would. A level is a quorum queue that
// dead-letters at least once: a message leaves it only when the next
// level, or the work queue, has confirmed it, so nothing is lost, where
// the classic rungs lose messages in the same scenario
// (BenchmarkFaultClusterLeaderKilled/rungs measures that, outside CI).
//
// Not lost is not on time. A level's new leader starts a dead-letter
// worker at once, and on RabbitMQ 3.10.8, when that worker's first message
// for a next queue comes before that queue's new leader is recorded, its
// publisher asks the dead node first and is refused; it asks again every
// dead_letter_worker_publisher_confirm_timeout (3 min by default), refused
// every time until that node is back (rabbit_fifo_client's machine version
// check, which rabbitmq-server#9221 removed from 3.11 and 3.12). Meanwhile
// the level holds what it dead-lettered, and everything expiring behind
// it: most of the scenario's messages, for as long as the node is down and
// then up to two timeouts more (6 min with the default:
// BenchmarkFaultClusterLeaderKilled/delays-default measures it). This
// scenario sets the timeout to 5 s on its nodes, as docs/operators.md
// tells operators to.
func TestFaultClusterDelaysLeaderKilled(t *testing.T) {
	t.Parallel()
	sc := clusterWaits{
		name:         "cluster-delays-leader-killed",
		pol:          clusterWaitsPolicy().WithDelayQueues(true),
		scheduled:    true,
		dlxTimeout:   5 * time.Second,
		settleWithin: 60 * time.Second,
	}
	r, how := sc.run(t)
	if r.lost != 0 {
		return // reported
	}
	// Every delivery came off the delay queues: the scheduled first
	// attempts and every retry. A retry that came any other way did not
	// test what this scenario is for.
	if n := how.count(func(k arrival) bool { return k.via != viaDelays }); n != 0 {
		t.Errorf("%s: %d deliveries did not come through the delay queues: %v", sc.name, n, how)
	}
	if how.count(func(k arrival) bool { return k.attempt > 1 }) == 0 {
		t.Errorf("%s: no retry was delivered: %v", sc.name, how)
	}
}

// BenchmarkFaultClusterLeaderKilled measures what CI cannot run, each
// once whatever b.N (each starts a cluster and takes from one to several
// minutes, so the framework never asks for a second run):
//
//   - rungs: the comparison the delay queues are measured against, the
//     same scenario with the retries on the classic rung queues (the
//     policy without OnDelayQueues) and the messages published at once,
//     since a rung carries no scheduled publish. A rung dead-letters home
//     at most once, so what expires from it while the work queue has no
//     leader is dropped by the broker: this run is expected to lose
//     messages.
//   - delays-default: TestFaultClusterDelaysLeaderKilled with the broker's
//     default dead_letter_worker_publisher_confirm_timeout (3 min), to
//     measure how late the levels held up by the node loss are.
//
// Each reports lost/op, duplicates/op and settle-s/op (from the kill to
// the last message's end, or to the end of the wait for it), and fails
// only when its accounting does not add up. Run it with
//
//	./scripts/test -run '^$' -bench FaultClusterLeaderKilled -benchtime 1x ./test/faults/
func BenchmarkFaultClusterLeaderKilled(b *testing.B) {
	for _, sc := range []clusterWaits{
		{name: "cluster-rungs-leader-killed", pol: clusterWaitsPolicy(), settleWithin: 30 * time.Second},
		{name: "cluster-delays-default-leader-killed", pol: clusterWaitsPolicy().WithDelayQueues(true), scheduled: true, settleWithin: 15 * time.Minute},
	} {
		sub := "rungs"
		if sc.scheduled {
			sub = "delays-default"
		}
		b.Run(sub, func(b *testing.B) {
			sc.measureOnly = true
			r, _ := sc.run(b)
			b.ReportMetric(float64(r.published), "published/op")
			b.ReportMetric(float64(r.lost), "lost/op")
			b.ReportMetric(float64(r.duplicates), "duplicates/op")
			b.ReportMetric(sc.settled.Seconds(), "settle-s/op")
		})
	}
}

// clusterWaitsPolicy: three attempts, the waits (1 s, 2 s) both over the
// threshold, so that every retry waits in the broker.
func clusterWaitsPolicy() retry.Policy {
	return retry.Exponential(3, time.Second, 0).WithJitter(0).WithBrokerWaitThreshold(500 * time.Millisecond)
}

// clusterWaits is the scenario of a quorum leader killed while messages
// wait in the broker, where pol says (rungs or the delay queues).
type clusterWaits struct {
	name string
	pol  retry.Policy
	// scheduled publishes each message with a delay of 1 to 8 s.
	scheduled bool
	// dlxTimeout, when set, is the nodes' dead_letter_worker_publisher_confirm_timeout.
	dlxTimeout time.Duration
	// settleWithin is how long after node 1 is back every message has to
	// end.
	settleWithin time.Duration
	// measureOnly reports lost messages instead of failing on them.
	measureOnly bool
	// settled is how long after the kill the last message ended (or the
	// wait for it did), set by run.
	settled time.Duration
}

// waitJobs are n jobs that all wait in the broker before they end: most
// fail once, a third twice, one in twenty-five every time (to the .dlq).
func waitJobs(prefix string, n int) []job {
	out := make([]job, n)
	for i := range out {
		j := job{ID: fmt.Sprintf("%s-%04d", prefix, i), FailUntil: 2}
		switch {
		case i%25 == 7:
			j.Always = true
		case i%3 == 0:
			j.FailUntil = 3
		}
		out[i] = j
	}
	return out
}

// scheduledDelay spreads the jobs' delays over 1 to 8 s, in units, so
// that every low level is walked.
func scheduledDelay(i int) time.Duration { return delay.Unit * time.Duration(8+(i*37)%57) }

func (sc *clusterWaits) run(tb testing.TB) (result, *arrivals) {
	tb.Helper()
	start := time.Now()
	nodes := startCluster(tb, sc.name)
	if sc.dlxTimeout > 0 {
		// What advanced.config sets for good; a dead-letter worker reads it
		// when it starts, which is when its queue gets a leader.
		for _, n := range nodes {
			n.Ctl(tb, "eval", fmt.Sprintf("application:set_env(rabbit, dead_letter_worker_publisher_confirm_timeout, %d).", sc.dlxTimeout.Milliseconds()))
		}
	}
	log := testLogger(tb)
	q := "faults." + sc.name
	quorum := map[string]any{"x-queue-type": "quorum"}
	bind, err := delay.Bind(q)
	if err != nil {
		tb.Fatal(err)
	}
	// Through node 1: the work queue and the delay infrastructure, whose
	// quorum queues node 1 then leads (3.10 places a quorum queue's leader
	// on the node the declaring client is connected to). Through node 0:
	// the rest, so that the classic queues (.dlq, .parked, the rungs) live
	// on a node that survives.
	top := delay.Topology()
	top.Queues = append(top.Queues, transport.Queue{Name: q, Durable: true, Args: quorum})
	top.Bindings = append(top.Bindings, bind)
	if err := dial(tb, nodes[1].URL, log).Declare(context.Background(), top); err != nil {
		tb.Fatal(err)
	}
	if err := dial(tb, nodes[0].URL, log).Declare(context.Background(), acemq.Topology(q, sc.pol, quorum)); err != nil {
		tb.Fatal(err)
	}
	levels := delayQueues()
	led := leaders(tb, nodes[0])
	for _, name := range append([]string{q}, levels...) {
		if led[name] != nodes[1].Name {
			tb.Fatalf("the leader of %s is %q, want %s", name, led[name], nodes[1].Name)
		}
	}
	waitingOn := levels
	if !sc.pol.UsesDelayQueues() {
		waitingOn = nil
		for _, d := range sc.pol.BrokerRungs() {
			waitingOn = append(waitingOn, retry.RungName(q, d))
		}
	}

	others := rabbitmq.WithURLs(nodes[2].URL, nodes[0].URL)
	srvTr := dial(tb, nodes[1].URL, log, others)
	pubTr := dial(tb, nodes[1].URL, log, others)
	l := newLedger()
	how := &arrivals{n: map[arrival]int{}}
	m := newMetrics()
	run := serve(tb, srvTr, q, &acemq.Server{Retry: sc.pol, PublishTimeout: 5 * time.Second, MeterProvider: m.provider,
		Queues: map[string]acemq.QueueConfig{q: {Args: quorum}}}, how.record(l.handler(2*time.Millisecond)), log)
	js := waitJobs(sc.name, outageMessages)
	out := func(i int, j job) acemq.Outgoing {
		o := acemq.Outgoing{RoutingKey: q, ID: j.ID, Body: body(j), ContentType: "application/json"}
		if sc.scheduled {
			o.Delay = scheduledDelay(i)
		}
		return o
	}
	stats := &publishStats{}
	published := make(chan []job, 1)
	var confirmed atomic.Int64
	go func() {
		published <- publishEach(tb, pubTr, js, 4, 60*time.Millisecond, stats, &confirmed, out)
	}()
	// The kill comes while the producer is half way, first attempts are
	// failing, and retries wait with the scheduled messages.
	var onThem int
	polltest.Within(tb, 30*time.Second, "the producer is half way, the handler busy and messages wait in the broker", func() bool {
		if confirmed.Load() < int64(len(js)/2) || l.totalCalls() < len(js)/20 {
			return false
		}
		onThem = waiting(nodes[0].URL, waitingOn)
		return onThem > 0
	})
	killed := time.Now()
	nodes[1].Kill(tb)
	tb.Logf("%s: node 1 killed %s after the start, with %d of %d published, %d handler calls made, %d retries sent and %d messages waiting on %s",
		sc.name, killed.Sub(start).Round(time.Millisecond), confirmed.Load(), len(js), l.totalCalls(),
		m.counter(tb, acemq.MetricRetries, nil), onThem, placeOf(sc.pol))
	sent := <-published
	tb.Logf("%s: producer: %s", sc.name, stats)
	after := leaders(tb, nodes[0])
	tb.Logf("%s: the leader of %s is now %s, of the levels %v", sc.name, q, after[q], countLeaders(after, levels))
	sk := newSink(nodes[0].URL, q)
	// Node 1 comes back, as its supervisor would start it again; until
	// then a level whose dead-letter worker first published to a queue that
	// node led holds what it dead-lettered (see the doc comment of
	// TestFaultClusterDelaysLeaderKilled).
	time.Sleep(time.Until(killed.Add(nodeDown)))
	sk.poll()
	held, queues := holding(tb, nodes[0], levels)
	tb.Logf("%s: %s after the kill, %d of %d ended, and the levels hold %d dead-lettered messages no next queue has taken; the queues holding messages: %s",
		sc.name, time.Since(killed).Round(time.Millisecond), l.ended(sk, sent), len(sent), held, queues)
	nodes[1].Restart(tb)
	tb.Logf("%s: node 1 started again %s after the kill", sc.name, time.Since(killed).Round(time.Millisecond))
	if polltest.Until(sc.settleWithin, sk.settled(l, sent)) {
		sc.settled = time.Since(killed)
		tb.Logf("%s: settled %s after the kill", sc.name, sc.settled.Round(time.Millisecond))
	} else {
		sc.settled = time.Since(killed)
		held, queues := holding(tb, nodes[0], levels)
		msg := fmt.Sprintf("%s: not settled within %s of node 1's return; the levels hold %d dead-lettered messages; the queues holding messages: %s",
			sc.name, sc.settleWithin, held, queues)
		if sc.measureOnly {
			tb.Log(msg)
		} else {
			tb.Error(msg)
		}
	}
	if err := run.stop(tb); err != nil {
		tb.Errorf("Run: %v", err)
	}
	// What is left on the levels and in undeliverable, first: a message
	// that leaves a level meanwhile is then found in the queue.
	left := map[string]int{}
	for _, name := range append(levels, delay.Undeliverable) {
		addAll(left, drain(tb, nodes[0].URL, name))
	}
	tl := sk.collect(tb, sc.name, sent, l.acceptedCopy(), sc.pol)
	addAll(tl.queued, left)
	tb.Logf("%s: deliveries: %v; retries scheduled: process %d, rungs %d, delay queues %d", sc.name, how,
		m.counter(tb, acemq.MetricRetries, map[string]string{"where": "process"}),
		m.counter(tb, acemq.MetricRetries, map[string]string{"where": "broker"}),
		m.counter(tb, acemq.MetricRetries, map[string]string{"where": "delays"}))
	var r result
	if sc.measureOnly {
		r = tl.measure(tb)
	} else {
		r = tl.report(tb)
	}
	if r.lost != 0 {
		tb.Logf("%s: of the lost, %s", sc.name, l.lostAfter(r.lostIDs))
	}
	return r, how
}

// measure is report for a run that is expected to lose messages: it prints
// the FAULT line and fails only when the accounting does not add up
// (something still queued after the scenario settled, or ended where its
// script did not send it).
func (tl *tally) measure(tb testing.TB) result {
	tb.Helper()
	r := tl.result()
	tl.printLine(tb, r)
	if r.lost != 0 {
		tb.Logf("%s: lost (expected here): %v", tl.name, head(r.lostIDs))
	}
	if r.duplicates != 0 {
		tb.Logf("%s: duplicates: %v", tl.name, head(r.duplicateIDs))
	}
	if r.queued != 0 || len(r.unexpected) != 0 {
		tb.Errorf("%s: the accounting does not add up: %d still queued, %d in the wrong place: %v",
			tl.name, r.queued, len(r.unexpected), head(r.unexpected))
	}
	return r
}

// lostAfter says how many handler calls each lost id had had: a message
// lost after a failed attempt was lost while its retry waited.
func (l *ledger) lostAfter(ids []string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	by := map[int]int{}
	for _, id := range ids {
		by[l.calls[id]]++
	}
	var parts []string
	for calls, n := range by {
		parts = append(parts, fmt.Sprintf("%d after %d handler calls", n, calls))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// nodeDown is how long node 1 stays down: long enough for the new leaders'
// message counts (reported every 5 s, quorum_tick_interval) to show what
// the levels hold.
const nodeDown = 8 * time.Second

// ended counts the jobs of js that reached their end.
func (l *ledger) ended(sk *sink, js []job) int {
	accepted := l.acceptedCopy()
	sk.mu.Lock()
	defer sk.mu.Unlock()
	n := 0
	for _, j := range js {
		if accepted[j.ID]+sk.dlq[j.ID]+sk.parked[j.ID] > 0 {
			n++
		}
	}
	return n
}

func placeOf(p retry.Policy) string {
	if p.UsesDelayQueues() {
		return "the delay queues"
	}
	return "rungs"
}

// Where a delivery came from: the newest x-death entry's queue.
const (
	viaDelays = "delay queues"
	viaRung   = "rung"
	viaDirect = "direct"
)
