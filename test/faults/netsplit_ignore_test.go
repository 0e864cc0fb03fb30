package faults_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// TestFaultNetsplitIgnore: a three-node cluster under
// cluster_partition_handling = ignore (net_ticktime 10 s), where RabbitMQ
// tells its clients nothing of a partition: no node pauses, no connection
// closes. Node 1 leads the work queue (a quorum queue with the broker's
// delivery limit); the delay levels and the classic queues live on node
// 0; the retries wait on the delay queues. Servers and publishers on nodes
// 0 and 2 (with the other nodes as fallbacks), and one server and one
// publisher sharing a transport connected to node 1 only. Under steady
// load node 1 is cut from the other two both ways for 25 s, then healed;
// the cluster stays split (RabbitMQ lists the partition), so the test does
// what RabbitMQ tells an operator to: restart the minority side (node 1,
// its VM killed and started again), and waits until it is whole.
// First it gives node 1 30 s to answer publishes again on its own (its
// quorum queue member follows the majority's leader once the nodes meet),
// and logs whether it did. A fourth server, consuming only (it publishes
// nothing while nothing comes), is connected to node 1 only too, and its
// readiness is logged: the stall watch sees publishes, not deliveries.
//
// Asserted: the node-1-only server says not ready with
// transport.ErrStalled within the stall bound (plus a margin for a loaded
// machine) of the cut, and the transport logged "the broker stalled"; the
// publishes with an unknown outcome on that transport stay within what
// the stall's rule allows; every id is accounted for (the
// FAULT line), lost=0, duplicates counted.
func TestFaultNetsplitIgnore(t *testing.T) {
	t.Parallel()
	sc := unseenSplit{name: "netsplit-ignore", opts: brokertest.NetsplitOptions{PartitionHandling: "ignore"}, cut: 25 * time.Second}
	sc.run(t)
}

// TestFaultNetsplitShortOfTicktime is TestFaultNetsplitIgnore under
// pause_minority with RabbitMQ's default net_ticktime of 60 s, node 1 cut
// off for 30 s: shorter than RabbitMQ takes to see a node gone (60 to
// 75 s), so no node pauses, none lists a partition, no connection closes,
// while the quorum queue's Raft group (which watches its members itself)
// elects a leader on the majority within seconds and node 1 can confirm
// nothing. The node-1-only server must say not ready through the stall
// watch alone, within its bound of the cut; after the heal node 1's
// member follows the new leader and the stall ends with no operator.
func TestFaultNetsplitShortOfTicktime(t *testing.T) {
	t.Parallel()
	sc := unseenSplit{name: "netsplit-short-of-ticktime", opts: brokertest.NetsplitOptions{NetTicktime: 60 * time.Second}, cut: 30 * time.Second}
	sc.run(t)
}

// unseenSplitMessages is how many messages the scenario publishes, a
// third from each node's publisher at about 12 a second each, so that the
// load spans the cut.
const unseenSplitMessages = 1200

// unseenSplitPace is each publisher's pause between two messages.
const unseenSplitPace = 80 * time.Millisecond

// unseenSplitMargin is what the stall may take over its bound to be seen
// on a loaded machine: the publisher's next publish after its last
// confirm, the drain loop's tick, the readiness poll.
const unseenSplitMargin = 10 * time.Second

// unseenSplit is node 1 cut off from the others under settings with
// which RabbitMQ does not close the minority's connections (ignore), or
// not before the cut ends (net_ticktime longer than the cut).
type unseenSplit struct {
	name string
	opts brokertest.NetsplitOptions
	cut  time.Duration
}

// fallbacksOf is every node's URL but node i's, in order after it.
func fallbacksOf(nodes []*brokertest.Node, i int) rabbitmq.Option {
	var urls []string
	for k := 1; k < len(nodes); k++ {
		urls = append(urls, nodes[(i+k)%len(nodes)].URL)
	}
	return rabbitmq.WithURLs(urls...)
}

// between is the handler calls begun from from to to.
func (p *progress) between(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if !c.Before(from) && !c.After(to) {
			n++
		}
	}
	return n
}

// duplicatesBy is the duplicates of tl (as result counts them) by the
// group of is each id falls in.
func duplicatesBy(tl *tally, group func(id string) string) map[string]int {
	out := map[string]int{}
	for _, j := range tl.published {
		ends := tl.accepted[j.ID] + tl.dlq[j.ID] + tl.parked[j.ID]
		if ends > 1 {
			out[group(j.ID)] += ends - 1
		}
		if ends > 0 {
			out[group(j.ID)] += tl.queued[j.ID]
		}
	}
	return out
}

// callsOf is the handler calls id had.
func (l *ledger) callsOf(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[id]
}

// restartMinority is what RabbitMQ tells an operator to do with a cluster
// that stayed split: stop the nodes of the side not trusted (here node i)
// and start them again, so that they take the other side's state. The
// node's VM is killed and started again on its data: restarting only its
// application (rabbitmqctl stop_app, start_app) worked in four runs of six
// here, and in the other two start_app never returned.
func restartMinority(tb testing.TB, s *brokertest.Netsplit, i int) {
	tb.Helper()
	s.Nodes[i].Kill(tb)
	s.Nodes[i].Restart(tb)
}

// count is stats' failures of kind (publishStats.fail's words).
func (s *publishStats) count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kinds[kind]
}

func (sc unseenSplit) run(t *testing.T) {
	t.Helper()
	brokertest.SharedURL(t) // the same gating as every integration test
	start := time.Now()
	s := startNetsplitWith(t, sc.name, sc.opts)
	nodes := s.Nodes
	const victim = netsplitVictim
	core, logs := observer.New(zap.InfoLevel)
	said := &libraryLog{obs: logs}
	log := zap.New(zapcore.NewTee(testLogger(t).Core(), core))

	q := "faults." + sc.name
	pol := clusterWaitsPolicy().WithDelayQueues(true)
	quorum := map[string]any{"x-queue-type": "quorum"}
	cfg := acemq.QueueConfig{Args: quorum, DeliveryLimit: netsplitDeliveryLimit}

	// Through node 0: the delay levels and the classic queues, on the
	// majority side. The work queue is declared by the node-1-only
	// server, through node 1, which so leads it.
	admin := dial(t, nodes[0].URL, log)
	bind, err := delay.Bind(q)
	if err != nil {
		t.Fatal(err)
	}
	top := acemq.Topology(q, pol, quorum)
	top.Queues = slices.DeleteFunc(top.Queues, func(x transport.Queue) bool { return x.Name == q })
	top.Bindings = slices.DeleteFunc(top.Bindings, func(b transport.Binding) bool { return b.Queue == q })
	for _, tp := range []transport.Topology{delay.Topology(), top} {
		if err := admin.Declare(context.Background(), tp); err != nil {
			t.Fatal(err)
		}
	}

	l := newLedger()
	how := &arrivals{n: map[arrival]int{}}
	prog := &progress{}
	m := newMetrics()
	h := prog.record(how.record(l.handler(2 * time.Millisecond)))
	onMinority, onSolo := &progress{}, &progress{} // the calls of the two node-1-only servers
	// The node-1-only transport, shared by a server and a publisher as a
	// service that consumes and publishes has it.
	minority := dial(t, nodes[victim].URL, log, rabbitmq.WithConnectionName(sc.name+" server and publisher on node 1 only"))
	runs := []*running{serve(t, minority, q, &acemq.Server{Retry: pol, PublishTimeout: 5 * time.Second, MeterProvider: m.provider,
		Queues: map[string]acemq.QueueConfig{q: cfg}}, onMinority.record(h), log)}
	if err := admin.Declare(context.Background(), transport.Topology{Bindings: []transport.Binding{bind}}); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 2} {
		tr := dial(t, nodes[i].URL, log, fallbacksOf(nodes, i), rabbitmq.WithConnectionName(fmt.Sprintf("%s server on node %d", sc.name, i)))
		runs = append(runs, serve(t, tr, q, &acemq.Server{Retry: pol, PublishTimeout: 5 * time.Second,
			Queues: map[string]acemq.QueueConfig{q: cfg}}, h, log))
	}
	solo := dial(t, nodes[victim].URL, log, rabbitmq.WithConnectionName(sc.name+" consuming server on node 1 only"))
	runs = append(runs, serve(t, solo, q, &acemq.Server{Retry: pol, PublishTimeout: 5 * time.Second,
		Queues: map[string]acemq.QueueConfig{q: cfg}}, onSolo.record(h), log))
	levels := delayQueues()
	before := leaders(t, nodes[0])
	t.Logf("%s: before the cut, %s leads %s, the levels are led %v; cluster:\n%s\nas node 0 lists them:\n%s", sc.name, before[q], q, countLeaders(before, levels),
		s.Describe(), quorumMembers(t, nodes[0], append([]string{q}, levels...)))
	if before[q] != nodes[victim].Name {
		t.Fatalf("%s: the leader of %s is %q, want node %d, %s", sc.name, q, before[q], victim, nodes[victim].Name)
	}

	js := netsplitJobs(sc.name, unseenSplitMessages)
	majorityStats, minorityStats := &publishStats{}, &publishStats{}
	var confirmed atomic.Int64
	var pubWG sync.WaitGroup
	var sentMu sync.Mutex
	var sent []job
	for i := range nodes {
		tr, stats := minority, minorityStats
		if i != victim {
			tr = dial(t, nodes[i].URL, log, fallbacksOf(nodes, i), rabbitmq.WithConnectionName(fmt.Sprintf("%s publisher on node %d", sc.name, i)))
			stats = majorityStats
		}
		var mine []job
		for k := i; k < len(js); k += len(nodes) {
			mine = append(mine, js[k])
		}
		pubWG.Go(func() {
			got := publishEach(t, tr, mine, 1, unseenSplitPace, stats, &confirmed, func(_ int, j job) acemq.Outgoing {
				return acemq.Outgoing{RoutingKey: q, ID: j.ID, Body: body(j), ContentType: "application/json"}
			})
			sentMu.Lock()
			sent = append(sent, got...)
			sentMu.Unlock()
		})
	}
	ready := watchReady(runs)
	state := func() string {
		return fmt.Sprintf("%d of %d published and %d handler calls made; node 1's publisher: %s", confirmed.Load(), len(js), l.totalCalls(), minorityStats)
	}

	polltest.Within(t, 90*time.Second, "a quarter published and the handlers busy", func() bool {
		return confirmed.Load() >= int64(len(js)/4) && l.totalCalls() >= len(js)/8
	})
	cutAt := time.Now()
	s.Isolate(t, victim)
	t.Logf("%s: %s after the start, node 1 cut off both ways, with %s", sc.name, cutAt.Sub(start).Round(time.Millisecond), state())

	// The stall watch: not ready within its bound of the cut.
	polltest.Within(t, rabbitmq.DefaultStallAfter+unseenSplitMargin, "the server on node 1 only not ready with ErrStalled", func() bool {
		return errors.Is(runs[0].srv.CheckReady(), transport.ErrStalled)
	})
	stalledAt := time.Now()
	unknownAtStall := minorityStats.count("unconfirmed")
	copiesAtStall := m.counter(t, acemq.MetricUnconfirmed, nil)
	t.Logf("%s: %s after the cut, the server on node 1 only says %q; %d of its publisher's publishes and %d of its copies had an unknown outcome",
		sc.name, stalledAt.Sub(cutAt).Round(time.Millisecond), runs[0].srv.CheckReady(), unknownAtStall, copiesAtStall)
	var waitingAtStall int64
	warned := logs.FilterMessageSnippet("the broker stalled").All()
	for _, e := range warned {
		if c, _ := e.ContextMap()["connection"].(string); c == sc.name+" server and publisher on node 1 only publish" {
			waitingAtStall, _ = e.ContextMap()["waiting"].(int64)
			t.Logf("%s: +%s %s %s %v", sc.name, e.Time.Sub(cutAt).Round(10*time.Millisecond), e.Level, e.Message, e.ContextMap())
			break
		}
	}
	if len(warned) == 0 {
		t.Errorf("%s: the server on node 1 only is not ready, and nothing logged \"the broker stalled\"", sc.name)
	}

	// The cluster's view in the middle of the cut, asked off the cut's
	// clock: rabbitmqctl on a node that has not yet seen node 1 gone waits
	// for it, which must not delay the heal (under pause_minority with a
	// 60 s net_ticktime, a late heal lets node 1 pause).
	time.Sleep(time.Until(cutAt.Add(sc.cut / 2)))
	viewAsked := time.Now()
	view := make(chan string, 1)
	go func() { view <- s.Describe() }()
	time.Sleep(time.Until(cutAt.Add(sc.cut)))
	t.Logf("%s: %s after the cut, before the heal, with %s", sc.name, time.Since(cutAt).Round(time.Millisecond), state())
	healAt := time.Now()
	s.Heal(t)
	t.Logf("%s: healed %s after the cut; cluster, asked %s after the cut (answered %s after the heal):\n%s", sc.name, healAt.Sub(cutAt).Round(time.Millisecond),
		viewAsked.Sub(cutAt).Round(time.Millisecond), time.Since(healAt).Round(time.Millisecond), <-view)

	// The stall's end: node 1 answers publishes again once its quorum
	// queue member follows the majority's leader, split or not.
	answered := polltest.Until(30*time.Second, func() bool { return runs[0].srv.CheckReady() == nil })
	stallEnd := time.Now()
	unknownAtEnd, copiesAtEnd := minorityStats.count("unconfirmed"), m.counter(t, acemq.MetricUnconfirmed, nil)
	t.Logf("%s: %s after the heal, the server on node 1 only says %v (answered again: %t)", sc.name, stallEnd.Sub(healAt).Round(time.Millisecond), runs[0].srv.CheckReady(), answered)

	// Whether RabbitMQ lists the partition once the nodes meet again: under
	// ignore it does and stays split; the operator restarts the minority.
	split := polltest.Until(20*time.Second, func() bool {
		for i := range nodes {
			if v, err := s.View(i); err == nil && v.Split() {
				return true
			}
		}
		return false
	})
	if split {
		t.Logf("%s: %s after the heal, the cluster stays split; handler calls since the heal: %d on the server on node 1 only, %d on the consuming one; cluster:\n%s\nas node 0 lists them:\n%s",
			sc.name, time.Since(healAt).Round(time.Millisecond), onMinority.between(healAt, time.Now()), onSolo.between(healAt, time.Now()), s.Describe(),
			quorumMembers(t, nodes[0], []string{q}))
		restartAt := time.Now()
		restartMinority(t, s, victim)
		t.Logf("%s: node 1 restarted in %s, %s after the heal", sc.name, time.Since(restartAt).Round(time.Millisecond), time.Since(healAt).Round(time.Millisecond))
	} else {
		t.Logf("%s: no node lists a partition 20 s after the heal", sc.name)
	}
	awaitWhole(t, s)
	wholeAt := time.Now()
	t.Logf("%s: whole %s after the heal; cluster:\n%s\nas node 0 lists them:\n%s", sc.name, wholeAt.Sub(healAt).Round(time.Millisecond), s.Describe(),
		quorumMembers(t, nodes[0], append([]string{q}, levels...)))
	polltest.Within(t, 90*time.Second, "the server on node 1 only ready again", func() bool { return runs[0].srv.CheckReady() == nil })
	t.Logf("%s: the server on node 1 only ready %s after the heal", sc.name, time.Since(healAt).Round(time.Millisecond))
	if !answered { // the stall ended with its connection, replaced after the restart
		stallEnd = time.Now()
		unknownAtEnd, copiesAtEnd = minorityStats.count("unconfirmed"), m.counter(t, acemq.MetricUnconfirmed, nil)
	}

	pubWG.Wait()
	t.Logf("%s: producers done %s after the cut; node 0 and 2's: %s; node 1's: %s", sc.name, time.Since(cutAt).Round(time.Millisecond), majorityStats, minorityStats)
	// A park that node 1 handled while the cluster was split found no
	// .parked queue (a classic queue on node 0, which node 1's partitioned
	// view has no live copy of): the library rejects such an original to
	// the work queue's own dead-letter route (its x-dead-letter-exchange,
	// the .dlq), saying so. Those parks are expected in the .dlq; any other
	// such rejection is not.
	sk := newSink(nodes[0].URL, q)
	parkedQ := acemq.ParkedQueue(q)
	rerouted := map[string]bool{}
	for _, e := range logs.FilterMessageSnippet("rejected to the queue's own dead-letter route").All() {
		c := e.ContextMap()
		id, _ := c["id"].(string)
		split := c["why"] == "missing" && !e.Time.Before(healAt) && !e.Time.After(wholeAt)
		switch {
		case split && c["to"] == parkedQ:
			rerouted[id] = true
			continue
		case split && c["to"] == acemq.DeadLetterQueue(q): // its end all the same
			t.Logf("%s: +%s a dead letter on node 1 while the cluster was split, rejected to the .dlq through the queue's own route: %s", sc.name,
				e.Time.Sub(cutAt).Round(10*time.Millisecond), id)
			continue
		}
		t.Errorf("%s: +%s %s %v: a copy rejected to the queue's own dead-letter route, not one on node 1 while the cluster was split", sc.name,
			e.Time.Sub(cutAt).Round(10*time.Millisecond), e.Message, c)
	}
	// A rejection on the split node may not take either: such a park is
	// delivered again and parked. Either end is its own.
	var settleOn []job
	for _, j := range sent {
		if !rerouted[j.ID] || !j.Park {
			settleOn = append(settleOn, j)
		}
	}
	settledAll := func() bool {
		if !sk.settled(l, settleOn)() {
			return false
		}
		sk.mu.Lock()
		defer sk.mu.Unlock()
		for id := range rerouted {
			if sk.dlq[id]+sk.parked[id] == 0 {
				return false
			}
		}
		return true
	}
	t.Logf("%s: parks node 1 handled while the cluster was split, rejected to the .dlq as their .parked queue was out of its reach: %d %v", sc.name, len(rerouted), slices.Sorted(maps.Keys(rerouted)))
	if !polltest.Until(90*time.Second, settledAll) {
		held, queues := holding(t, nodes[0], levels)
		t.Errorf("%s: not settled within 90 s of the producers' end; the levels hold %d dead-lettered messages; the queues holding messages: %s", sc.name, held, queues)
	}
	settled := time.Since(cutAt)
	after := leaders(t, nodes[0])
	t.Logf("%s: after the heal, %s leads %s, the levels are led %v", sc.name, after[q], q, countLeaders(after, levels))
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
	tl := sk.collect(t, sc.name, sent, l.acceptedCopy(), pol)
	addAll(tl.queued, left)
	for i, j := range tl.published {
		if rerouted[j.ID] && j.Park && tl.parked[j.ID] == 0 {
			tl.published[i].Park, tl.published[i].Reject = false, true // expected in the .dlq
		}
	}

	// What the library saw and said.
	gap, gapFrom := prog.longestGap(cutAt, healAt.Add(30*time.Second))
	t.Logf("%s: settled %s after the cut; deliveries: %v", sc.name, settled.Round(time.Millisecond), how)
	t.Logf("%s: handler calls: the longest pause %s, from %s after the cut; %s", sc.name, gap.Round(time.Millisecond), gapFrom.Sub(cutAt).Round(time.Millisecond),
		prog.perPhase(cutAt, healAt, wholeAt))
	t.Logf("%s: handler calls per second from 5 s before the cut to 15 s after the heal: %v", sc.name,
		prog.perSecond(cutAt.Add(-5*time.Second), int(healAt.Sub(cutAt)/time.Second)+20))
	t.Logf("%s: CheckReady of the servers on node 1 only (with the publisher), 0, 2, and the consuming one on node 1 only: %s", sc.name, notReady.describe(cutAt))
	for _, on := range []struct {
		name string
		p    *progress
	}{{"the server on node 1 only", onMinority}, {"the consuming server on node 1 only", onSolo}} {
		t.Logf("%s: handler calls of %s: %d before the cut, %d from the cut to the heal, %d from the heal to the whole cluster, %d after", sc.name, on.name,
			on.p.between(start, cutAt), on.p.between(cutAt, healAt), on.p.between(healAt, wholeAt), on.p.between(wholeAt, time.Now()))
	}
	if notReady.notReadyWithin(3, cutAt.Add(rabbitmq.DefaultStallAfter+unseenSplitMargin), healAt) {
		t.Logf("%s: the consuming server on node 1 only said not ready during the cut", sc.name)
	} else {
		t.Logf("%s: the consuming server on node 1 only said it was ready throughout the cut, with %d handler calls from 1 s after the cut to the heal", sc.name,
			onSolo.between(cutAt.Add(time.Second), healAt))
	}
	t.Logf("%s: the library said, from the cut to 30 s after the whole cluster:\n%s", sc.name, said.between(cutAt, wholeAt.Add(30*time.Second), cutAt))

	// The stall's bound on unknown outcomes, on the node-1-only transport
	// (its publisher's and its server's copies share the publish
	// connection): what was in flight when the stall began (the unknown
	// outcomes until then, and the publishes the warning says waited),
	// then the probe let through at once and one per stall bound until the
	// stall ended, and one more for the probe in flight as it ended.
	unknown := minorityStats.count("unconfirmed")
	copies := m.counter(t, acemq.MetricUnconfirmed, nil)
	stalledFor := stallEnd.Sub(stalledAt)
	bound := unknownAtStall + int(copiesAtStall) + int(waitingAtStall) + 1 + int(stalledFor/rabbitmq.DefaultStallAfter) + 1
	t.Logf("%s: unknown outcomes on node 1's transport by the stall's end: %d of its publisher's publishes (%d by the stall), %d of its server's copies (%d by the stall), %d waiting at the stall; the bound %d (stalled for about %s); refused unsent while stalled: %d; by the end of the run: %d and %d",
		sc.name, unknownAtEnd, unknownAtStall, copiesAtEnd, copiesAtStall, waitingAtStall, bound, stalledFor.Round(time.Second), minorityStats.count("stalled"), unknown, copies)
	if unknownAtEnd+int(copiesAtEnd) > bound {
		t.Errorf("%s: %d publishes with an unknown outcome on node 1's transport by the stall's end, over the stall's bound of %d", sc.name, unknownAtEnd+int(copiesAtEnd), bound)
	}
	if minorityStats.count("stalled") == 0 {
		t.Errorf("%s: no publish of node 1's publisher was refused unsent while the broker stalled: %s", sc.name, minorityStats)
	}

	r := tl.report(t)
	for _, id := range head(r.unexpected) {
		id = id[:strings.IndexByte(id, ' ')]
		var lines []string
		for _, e := range logs.FilterField(zap.String("id", id)).All() {
			lines = append(lines, fmt.Sprintf("  +%s %s %s %v", e.Time.Sub(cutAt).Round(10*time.Millisecond), e.Level, e.Message, e.ContextMap()))
		}
		t.Logf("%s: %s, %d handler calls; the library said of it:\n%s", sc.name, id, l.callsOf(id), strings.Join(lines, "\n"))
	}
	t.Logf("%s: duplicates by the publisher of the id: %v", sc.name, duplicatesBy(tl, func(id string) string {
		var k int
		_, _ = fmt.Sscanf(id[len(id)-4:], "%d", &k)
		return fmt.Sprintf("node %d", k%len(nodes))
	}))
	if r.lost != 0 {
		t.Logf("%s: of the lost, %s", sc.name, l.lostAfter(r.lostIDs))
	}
	if n := how.count(func(k arrival) bool { return k.attempt > 1 }); n == 0 {
		t.Errorf("%s: no retry was delivered: %v", sc.name, how)
	}
}
