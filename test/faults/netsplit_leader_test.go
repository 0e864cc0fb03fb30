package faults_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// TestFaultNetsplitLeaderCut: a three-node cluster under pause_minority
// with a 10 s net_ticktime (brokertest.StartNetsplitCluster). Node 1 leads
// the work queue (a quorum queue with the broker's delivery limit) and
// every delay level; the retries wait on the delay queues. A server and a
// publisher are connected to each node, each given the other two as
// fallbacks. Under steady load, with retries waiting on the levels, node 1
// is cut from the other two at the network level (its distribution
// traffic dropped both ways, AMQP untouched) for 20 s and then healed.
// The majority elects new leaders; node 1 sees itself in the minority and
// pauses, closing its clients' connections, which reconnect to the
// majority. A fourth server, connected to node 1 only, stays away until
// the heal and must say so (CheckReady not ready while node 1 is paused).
// Every id is accounted for (the FAULT line): lost must be 0,
// duplicates are counted.
func TestFaultNetsplitLeaderCut(t *testing.T) {
	t.Parallel()
	sc := netsplitScenario{name: "netsplit-leader-cut", pol: clusterWaitsPolicy().WithDelayQueues(true), minorityClient: true}
	sc.run(t)
}

// TestFaultNetsplitLeaderCutOneWay is TestFaultNetsplitLeaderCut with
// only what node 1 sends the others dropped: they still reach it, it
// reaches neither (its TCP connections to them then see no
// acknowledgements).
func TestFaultNetsplitLeaderCutOneWay(t *testing.T) {
	t.Parallel()
	sc := netsplitScenario{name: "netsplit-leader-cut-oneway", pol: clusterWaitsPolicy().WithDelayQueues(true), oneWay: true}
	sc.run(t)
}

// BenchmarkFaultNetsplitLeaderCut measures what CI does not run, once
// whatever b.N (it starts a cluster and takes a minute and a half):
// TestFaultNetsplitLeaderCut with the retries on the classic rung queues
// (the policy without OnDelayQueues), both ways and one way. A rung
// dead-letters home at most once, so a retry that expires from it while
// the work queue has no leader that can take it is dropped by the broker:
// these runs are expected to lose messages. Each reports lost/op and
// duplicates/op and fails only when its accounting does not add up. Run it
// with
//
//	./scripts/test -run '^$' -bench FaultNetsplitLeaderCut -benchtime 1x ./test/faults/
func BenchmarkFaultNetsplitLeaderCut(b *testing.B) {
	for _, oneWay := range []bool{false, true} {
		sub, name := "rungs", "netsplit-rungs-leader-cut"
		if oneWay {
			sub, name = "rungs-oneway", name+"-oneway"
		}
		b.Run(sub, func(b *testing.B) {
			sc := netsplitScenario{name: name, pol: clusterWaitsPolicy(), oneWay: oneWay, measureOnly: true}
			r := sc.run(b)
			b.ReportMetric(float64(r.published), "published/op")
			b.ReportMetric(float64(r.lost), "lost/op")
			b.ReportMetric(float64(r.duplicates), "duplicates/op")
		})
	}
}

// netsplitCut is how long the victim stays cut off: long enough for the
// majority to see it gone (net_ticktime 10 s: 10 to 12.5 s) and for it to
// pause itself, and for the clients to move.
const netsplitCut = 20 * time.Second

// netsplitMessages is how many messages the scenario publishes, at about
// 50 a second, so that the load spans the cut.
const netsplitMessages = 1500

// netsplitDeliveryLimit is the work queue's x-delivery-limit.
const netsplitDeliveryLimit = 5

// netsplitScenario is the leader's node cut off under load, with the
// retries where pol says (the delay queues, or the classic rungs).
type netsplitScenario struct {
	name string
	pol  retry.Policy
	// oneWay drops only what the victim sends.
	oneWay bool
	// measureOnly reports lost messages instead of failing on them.
	measureOnly bool
	// minorityClient adds a fourth server, connected to the victim only
	// (no fallbacks), which must say it is not ready while the victim is
	// paused.
	minorityClient bool
	// delayOf, when set, is the Delay job i is published with (0: none),
	// so that delayed messages walk the levels across the cut.
	delayOf func(i int) time.Duration
	// feed, when set, starts a producer besides the publishers (the
	// outbox relay of netsplit_walk_test.go) once the servers consume.
	feed func(t testing.TB, s *brokertest.Netsplit, q string, log *zap.Logger) netsplitFeed
}

// netsplitFeed is a producer a scenario runs besides its publishers.
type netsplitFeed interface {
	// sent waits until the producer has written everything and returns
	// the jobs it owes the broker.
	sent(t testing.TB) []job
	// stop ends it once the scenario settled, failing t if it still holds
	// what it owes.
	stop(t testing.TB)
}

// netsplitVictim is the node the scenarios cut off: the one that leads
// their quorum queues.
const netsplitVictim = 1

// startNetsplit starts the three-node cluster that can split, stopped at
// the end of t, with the dead-letter worker's confirm timeout
// docs/operators.md tells operators to set.
func startNetsplit(t testing.TB, name string) *brokertest.Netsplit {
	t.Helper()
	return startNetsplitWith(t, name, brokertest.NetsplitOptions{})
}

// startNetsplitWith is startNetsplit with the partition settings of o.
func startNetsplitWith(t testing.TB, name string, o brokertest.NetsplitOptions) *brokertest.Netsplit {
	t.Helper()
	start := time.Now()
	s, err := brokertest.StartNetsplitCluster(3, o)
	if err != nil {
		t.Fatalf("start a three-node cluster that can split: %v", err)
	}
	t.Cleanup(s.Stop)
	handling, tick := o.PartitionHandling, o.NetTicktime
	if handling == "" {
		handling = "pause_minority"
	}
	if tick == 0 {
		tick = 10 * time.Second
	}
	t.Logf("%s: the cluster started in %s (%s, net_ticktime %s)", name, time.Since(start).Round(time.Millisecond), handling, tick)
	// The 3.10.8 dead-letter worker stall on a new leader
	// (TestFaultClusterDelaysLeaderKilled): the timeout docs/operators.md
	// tells operators to set.
	for _, n := range s.Nodes {
		n.Ctl(t, "eval", "application:set_env(rabbit, dead_letter_worker_publisher_confirm_timeout, 5000).")
	}
	return s
}

// netsplitSpan is when a partition's steps came.
type netsplitSpan struct{ cut, paused, healed time.Time }

// splitAndHeal cuts node victim off from the others (both ways, or only
// what it sends) at once, waits for pause_minority to pause it and for a
// leader on the majority for every queue of led, keeps it cut until
// netsplitCut after the cut, heals, and waits for the cluster to be whole
// again. It logs each step with the cluster's view and what state says of
// the load, and at the end each queue of led's leader and members
// (quorumMembers; the caller logs them before, since rabbitmqctl takes a
// second or more that a cut timed to a step cannot wait).
func splitAndHeal(t testing.TB, s *brokertest.Netsplit, name string, victim int, oneWay bool, led []string, state func() string) netsplitSpan {
	t.Helper()
	nodes := s.Nodes
	other := nodes[(victim+1)%len(nodes)]
	var sp netsplitSpan
	sp.cut = time.Now()
	if oneWay {
		s.IsolateOneWay(t, victim)
	} else {
		s.Isolate(t, victim)
	}
	t.Logf("%s: node %d cut off (%s), with %s", name, victim, map[bool]string{false: "both ways", true: "one way"}[oneWay], state())
	polltest.Within(t, 90*time.Second, fmt.Sprintf("node %d paused by pause_minority and the majority running without it", victim), func() bool {
		v, err := s.View(victim)
		if err != nil || !v.Paused {
			return false
		}
		v0, err := s.View((victim + 1) % len(nodes)) // other's
		return err == nil && len(v0.Running) == len(nodes)-1 && !slices.Contains(v0.Running, nodes[victim].Name)
	})
	sp.paused = time.Now()
	t.Logf("%s: %s after the cut, node %d is paused; cluster:\n%s", name, sp.paused.Sub(sp.cut).Round(time.Millisecond), victim, s.Describe())
	var during map[string]string
	polltest.Within(t, 90*time.Second, fmt.Sprintf("a leader on the majority for the %d quorum queues", len(led)), func() bool {
		during = leaders(t, other)
		for _, name := range led {
			if during[name] == "" || during[name] == nodes[victim].Name {
				return false
			}
		}
		return true
	})
	t.Logf("%s: %s after the cut, the majority leads them all %v", name, time.Since(sp.cut).Round(time.Millisecond), countLeaders(during, led))
	time.Sleep(time.Until(sp.cut.Add(netsplitCut)))
	sp.healed = time.Now()
	s.Heal(t)
	t.Logf("%s: healed %s after the cut, with %s", name, sp.healed.Sub(sp.cut).Round(time.Millisecond), state())
	awaitWhole(t, s)
	t.Logf("%s: whole %s after the heal; cluster:\n%s\nas %s lists them:\n%s", name, time.Since(sp.healed).Round(time.Millisecond), s.Describe(),
		other.Name, quorumMembers(t, other, led))
	return sp
}

// netsplitJobs are n jobs: every fifth fails once (a retry that waits in
// the broker), one in fifty every time (to the .dlq), one in sixty is
// parked, one in seventy rejected.
func netsplitJobs(prefix string, n int) []job {
	out := make([]job, n)
	for i := range out {
		j := job{ID: fmt.Sprintf("%s-%04d", prefix, i)}
		switch {
		case i%50 == 7:
			j.Always = true
		case i%60 == 11:
			j.Park = true
		case i%70 == 13:
			j.Reject = true
		case i%5 == 2:
			j.FailUntil = 2
		}
		out[i] = j
	}
	return out
}

func (sc *netsplitScenario) run(t testing.TB) result {
	t.Helper()
	brokertest.SharedURL(t) // the same gating as every integration test
	start := time.Now()
	s := startNetsplit(t, sc.name)
	nodes := s.Nodes
	const victim = netsplitVictim
	core, logs := observer.New(zap.InfoLevel)
	said := &libraryLog{obs: logs}
	log := zap.New(zapcore.NewTee(testLogger(t).Core(), core))

	q := "faults." + sc.name
	quorum := map[string]any{"x-queue-type": "quorum"}
	cfg := acemq.QueueConfig{Args: quorum, DeliveryLimit: netsplitDeliveryLimit}

	// Through the victim: the delay levels and the work queue (its first
	// server declares it), which it so leads. Through node 0: the classic
	// queues (.dlq, .parked, rungs), on the majority side.
	others := func(i int) rabbitmq.Option {
		var urls []string
		for k := 1; k < len(nodes); k++ {
			urls = append(urls, nodes[(i+k)%len(nodes)].URL)
		}
		return rabbitmq.WithURLs(urls...)
	}
	bind, err := delay.Bind(q)
	if err != nil {
		t.Fatal(err)
	}
	dtop := delay.Topology()
	if err := dial(t, nodes[victim].URL, log).Declare(context.Background(), dtop); err != nil {
		t.Fatal(err)
	}
	top := acemq.Topology(q, sc.pol, quorum)
	top.Queues = slices.DeleteFunc(top.Queues, func(x transport.Queue) bool { return x.Name == q })
	top.Bindings = slices.DeleteFunc(top.Bindings, func(b transport.Binding) bool { return b.Queue == q })
	if err := dial(t, nodes[0].URL, log).Declare(context.Background(), top); err != nil {
		t.Fatal(err)
	}

	l := newLedger()
	how := &arrivals{n: map[arrival]int{}}
	prog := &progress{}
	var runs []*running
	for _, i := range []int{victim, 0, 2} {
		tr := dial(t, nodes[i].URL, log, others(i), rabbitmq.WithConnectionName(fmt.Sprintf("netsplit server on node %d", i)))
		runs = append(runs, serve(t, tr, q, &acemq.Server{Retry: sc.pol, PublishTimeout: 5 * time.Second,
			Queues: map[string]acemq.QueueConfig{q: cfg}}, prog.record(how.record(l.handler(2*time.Millisecond))), log))
		if i == victim {
			admin := dial(t, nodes[0].URL, log)
			if err := admin.Declare(context.Background(), transport.Topology{Bindings: []transport.Binding{bind}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sc.minorityClient {
		tr := dial(t, nodes[victim].URL, log, rabbitmq.WithConnectionName("netsplit server on node 1 only"))
		runs = append(runs, serve(t, tr, q, &acemq.Server{Retry: sc.pol, PublishTimeout: 5 * time.Second,
			Queues: map[string]acemq.QueueConfig{q: cfg}}, prog.record(how.record(l.handler(2*time.Millisecond))), log))
	}
	levels := delayQueues()
	waitingOn := levels
	if !sc.pol.UsesDelayQueues() {
		waitingOn = nil
		for _, d := range sc.pol.BrokerRungs() {
			waitingOn = append(waitingOn, retry.RungName(q, d))
		}
	}
	before := leaders(t, nodes[0])
	t.Logf("%s: before the cut, %s leads %s, the levels are led %v; cluster:\n%s\nas node 0 lists them:\n%s", sc.name, before[q], q, countLeaders(before, levels),
		s.Describe(), quorumMembers(t, nodes[0], append([]string{q}, levels...)))
	if before[q] != nodes[victim].Name {
		t.Fatalf("%s: the leader of %s is %q, want node %d, %s", sc.name, q, before[q], victim, nodes[victim].Name)
	}

	js := netsplitJobs(sc.name, netsplitMessages)
	stats := &publishStats{}
	var confirmed atomic.Int64
	var pubWG sync.WaitGroup
	var sentMu sync.Mutex
	var sent []job
	for i := range nodes {
		pubTr := dial(t, nodes[i].URL, log, others(i), rabbitmq.WithConnectionName(fmt.Sprintf("netsplit publisher on node %d", i)))
		var mine []job
		for k := i; k < len(js); k += len(nodes) {
			mine = append(mine, js[k])
		}
		first := i
		pubWG.Go(func() {
			got := publishEach(t, pubTr, mine, 1, 50*time.Millisecond, stats, &confirmed, func(k int, j job) acemq.Outgoing {
				o := acemq.Outgoing{RoutingKey: q, ID: j.ID, Body: body(j), ContentType: "application/json"}
				if sc.delayOf != nil {
					o.Delay = sc.delayOf(first + k*len(nodes))
				}
				return o
			})
			sentMu.Lock()
			sent = append(sent, got...)
			sentMu.Unlock()
		})
	}
	var feed netsplitFeed
	if sc.feed != nil {
		feed = sc.feed(t, s, q, log)
	}
	ready := watchReady(runs)

	var onThem int
	polltest.Within(t, 90*time.Second, "a quarter published, the handlers busy and retries waiting in the broker", func() bool {
		if confirmed.Load() < int64(len(js)/4) || l.totalCalls() < len(js)/8 {
			return false
		}
		onThem = waiting(nodes[0].URL, waitingOn)
		return onThem > 0
	})
	cutAt := time.Now()
	t.Logf("%s: %s after the start, %d messages wait on %s", sc.name, cutAt.Sub(start).Round(time.Millisecond), onThem, placeOf(sc.pol))
	span := splitAndHeal(t, s, sc.name, victim, sc.oneWay, append([]string{q}, levels...), func() string {
		return fmt.Sprintf("%d of %d published and %d handler calls made", confirmed.Load(), len(js), l.totalCalls())
	})
	pausedAt, healAt := span.paused, span.healed

	pubWG.Wait()
	if feed != nil {
		sent = append(sent, feed.sent(t)...)
	}
	t.Logf("%s: producers done %s after the cut: %s", sc.name, time.Since(cutAt).Round(time.Millisecond), stats)
	sk := newSink(nodes[0].URL, q)
	// A run expected to lose messages waits less for what will not come.
	settleWithin := 90 * time.Second
	if sc.measureOnly {
		settleWithin = 30 * time.Second
	}
	settledOK := polltest.Until(settleWithin, sk.settled(l, sent))
	settled := time.Since(cutAt)
	if !settledOK {
		held, queues := holding(t, nodes[0], levels)
		msg := fmt.Sprintf("%s: not settled within %s of the producers' end; the levels hold %d dead-lettered messages; the queues holding messages: %s", sc.name, settleWithin, held, queues)
		if sc.measureOnly {
			t.Log(msg)
		} else {
			t.Error(msg)
		}
	}
	after := leaders(t, nodes[0])
	t.Logf("%s: after the heal, %s leads %s, the levels are led %v", sc.name, after[q], q, countLeaders(after, levels))
	if feed != nil {
		feed.stop(t)
	}
	notReady := ready.stop()
	for _, r := range runs {
		if err := r.stop(t); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	left := map[string]int{}
	for _, name := range append(levels, delay.Undeliverable) {
		addAll(left, drain(t, nodes[0].URL, name))
	}
	tl := sk.collect(t, sc.name, sent, l.acceptedCopy(), sc.pol)
	addAll(tl.queued, left)

	// What the library saw and said.
	gap, gapFrom := prog.longestGap(cutAt, healAt.Add(30*time.Second))
	t.Logf("%s: settled %s after the cut; deliveries: %v", sc.name, settled.Round(time.Millisecond), how)
	t.Logf("%s: handler calls: the longest pause %s, from %s after the cut; %s",
		sc.name, gap.Round(time.Millisecond), gapFrom.Sub(cutAt).Round(time.Millisecond), prog.perPhase(cutAt, pausedAt, healAt))
	t.Logf("%s: handler calls per second from 5 s before the cut to 15 s after the heal: %v", sc.name,
		prog.perSecond(cutAt.Add(-5*time.Second), int(healAt.Sub(cutAt)/time.Second)+20))
	t.Logf("%s: CheckReady of the servers on nodes 1, 0, 2 (and 1 only): %s", sc.name, notReady.describe(cutAt))
	if sc.minorityClient && !notReady.notReadyWithin(3, pausedAt, healAt) {
		t.Errorf("%s: the server connected to node 1 only said it was ready all the while node 1 was paused", sc.name)
	}
	t.Logf("%s: the library said, from the cut to 30 s after the heal:\n%s", sc.name, said.between(cutAt, healAt.Add(30*time.Second), cutAt))

	var r result
	if sc.measureOnly {
		r = tl.measure(t)
	} else {
		r = tl.report(t)
	}
	if r.lost != 0 {
		t.Logf("%s: of the lost, %s", sc.name, l.lostAfter(r.lostIDs))
	}
	if n := how.count(func(k arrival) bool { return k.attempt > 1 }); n == 0 {
		t.Errorf("%s: no retry was delivered: %v", sc.name, how)
	}
	return r
}

// awaitWhole waits until the cluster is whole again after a heal, failing
// with what kept it from being so. A paused node rejoins within seconds on
// an idle machine (5.6 s in the walk, alone); CI runs two clusters beside
// the other scenarios, so the wait is generous.
func awaitWhole(t testing.TB, s *brokertest.Netsplit) {
	t.Helper()
	var why string
	if !polltest.Until(4*time.Minute, func() bool { why = s.NotWhole(); return why == "" }) {
		t.Fatalf("the cluster is not whole 4 minutes after the heal: %s; cluster:\n%s", why, s.Describe())
	}
}
