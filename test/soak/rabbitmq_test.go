package soak_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/retry"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
	"github.com/acemq/acemq/transport/memory"
)

// The RabbitMQ run's flags: it plays the first -soak.rabbitmq-duration of
// the schedule TestSoak plays for the same seed and schedule flags, every
// simulated wait divided by -soak.rabbitmq-scale (the publishes and faults,
// the retry policies, the handlers' sleeps and HandlerTimeout alike).
var (
	rabbitDurationFlag = flag.Duration("soak.rabbitmq-duration", 6*time.Hour, "simulated time TestSoakRabbitMQ plays of the schedule")
	rabbitScaleFlag    = flag.Int("soak.rabbitmq-scale", 300, "how many times faster than simulated time TestSoakRabbitMQ runs")
)

// rabbitSkips are the fault kinds the RabbitMQ run draws and does not do,
// and why: no operation of RabbitMQ's makes them happen to order. Each is
// still drawn, so that the rest of the schedule is the seed's.
var rabbitSkips = map[string]string{
	"nack":        "RabbitMQ nacks a publish only when a queue refuses it (reject-publish at its limit, a quorum queue without a leader) or fails inside; no command nacks the next publishes",
	"unconfirmed": "a confirm is lost only when a channel dies with the publish in flight: connections-closed brings it about at random, not to order",
	"dropped":     "a publish lost unconfirmed before the broker took it is a connection dying mid-write: connections-closed's, at random, not to order",
	"consumers-cancelled": "RabbitMQ sends basic.cancel only when a consumer's queue goes (deleted, which queue-deleted does, or its node lost in a cluster); " +
		"on one node there is no cancel that keeps the queue",
}

// TestSoakRabbitMQ holds RabbitMQ to the story TestSoak tells on the memory
// transport (issue 29): the same seeded schedule, its times compressed
// -soak.rabbitmq-scale times, against the shared broker in a vhost of its
// own, with the faults RabbitMQ can take done for real (every connection
// of the vhost closed by rabbitmqctl, a work queue deleted from a second
// connection, a process restart; handlers failing, slow and deaf to their
// context as on the memory transport) and the others drawn and left out
// (rabbitSkips, named in the SOAK line). The same ledger decides: lost
// must be 0; duplicates are counted.
func TestSoakRabbitMQ(t *testing.T) {
	brokertest.SharedURL(t) // the gate: skipped without a broker unless CI is set
	// A private node, since a memory alarm blocks a whole node.
	node, err := brokertest.StartNode()
	if err != nil {
		t.Fatalf("soak: start a private RabbitMQ node: %v", err)
	}
	t.Cleanup(node.Stop)
	url, vh := node.FreshVhost(t)
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	scale := time.Duration(max(*rabbitScaleFlag, 1))
	wallStart := time.Now()
	t.Logf("soak seed %d (replay with -soak.seed=%d)", seed, seed)
	defer func() {
		if t.Failed() {
			fmt.Printf("SOAK FAILED transport=rabbitmq seed=%d (replay: ./scripts/test -run TestSoakRabbitMQ ./test/soak/ -args -soak.seed=%d -soak.rabbitmq-duration=%v -soak.rabbitmq-scale=%d)\n",
				seed, seed, *rabbitDurationFlag, scale)
		}
	}()

	l := newLedger()
	w := newRabbitWorld(t, node, url, vh, l, scale)
	pubTr := w.dial("publisher")
	pub := &acemq.Publisher{Transport: pubTr, Mandatory: true}
	w.pubTr = pubTr
	t.Cleanup(w.unblock)
	w.start()

	start := memory.Epoch // a step's simulated time reads as in TestSoak's story
	paced := time.Now()   // the schedule's wall time starts once the first server consumes
	sched := newSchedule(seed, start, *rabbitDurationFlag)
	faults, skipped := map[string]int{}, map[string]int{}
	stats := &publishTries{}
	for {
		st, ok := sched.next()
		if !ok {
			break
		}
		time.Sleep(time.Until(paced.Add(st.at.Sub(start) / scale)))
		if st.fault == "" {
			w.h.set(st.id, st.script)
			rabbitPublish(t, pub, l, st.id, st.queue, stats)
			continue
		}
		kind := st.fault
		switch {
		case kind == "none":
		case rabbitSkips[kind] != "":
			skipped[kind]++
		default:
			faults[kind]++
			t.Logf("soak: %v (wall %v): %s %s", st.at.Sub(start), time.Since(paced).Round(time.Millisecond), kind, st.target)
			w.inject(st)
		}
	}
	played := time.Since(paced)

	// The schedule is over: the alarm cleared, everything that waits is
	// let run to its end, then the last process stops and the queues are
	// counted.
	w.unblock()
	w.drain(2 * time.Minute)
	w.stop()
	collect(t, pubTr, l, w.classic)

	f := l.figures()
	line := fmt.Sprintf("SOAK transport=rabbitmq simulated=%v scale=%d messages=%d handled=%d dlq=%d parked=%d held=%d destroyed=%d lost=%d duplicates=%d faults=%s (%d) without=%s skipped=%s (%d) seed=%d wall=%v",
		*rabbitDurationFlag, scale, f.published, f.handled, f.dlq, f.parked, f.held, f.destroyed, f.lost, f.duplicates,
		faultLine(faults), total(faults), strings.Join(leftOut(), ","), faultLine(skipped), total(skipped), seed,
		time.Since(wallStart).Round(time.Millisecond))
	fmt.Println(line)
	t.Log(line)
	t.Logf("soak: the schedule played in %v of wall time (%v as scheduled: a fault's rabbitmqctl call delays the steps after it, which then catch up); failed publish tries, by error: %s",
		played.Round(time.Millisecond), *rabbitDurationFlag/scale, stats)
	t.Logf("soak: ends by script: %s", endsByScript(l, w.h))
	for _, d := range head(f.duplicateIDs) {
		t.Logf("soak: duplicate: %s", w.story(strings.Fields(d)[0]))
	}
	if bound := w.destroyable(); f.destroyed > bound {
		t.Errorf("soak: %d ids destroyed by the queues' deletions, more than the %d they held ready, on their rungs and in the servers' prefetch (seed %d)",
			f.destroyed, bound, seed)
	}
	checkEnds(t, f, seed, w.story)
}

// leftOut names the kinds the RabbitMQ run does not do: rabbitSkips, and
// those -soak.without leaves out of both runs.
func leftOut() []string {
	var out []string
	for k := range rabbitSkips {
		out = append(out, k)
	}
	for _, k := range strings.Split(*withoutFlag, ",") {
		if k != "" && rabbitSkips[k] == "" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// rabbitWorld is the RabbitMQ run's broker side: the vhost, the running
// server (restarted as a process is) on a transport of its own, and what
// the queues' deletions may have taken.
type rabbitWorld struct {
	t       *testing.T
	node    *brokertest.Node
	url, vh string
	scale   time.Duration
	h       *handler
	l       *ledger
	log     *zap.Logger

	classic, quorum retry.Policy

	pubTr *rabbitmq.Transport // the soak's publisher: collect's, and redeclared's view
	tr    *rabbitmq.Transport // the running server's
	srv   *acemq.Server
	done  chan error

	mu        sync.Mutex
	deletions []deletion

	alarm     sync.WaitGroup // the goroutine that clears the memory alarm
	alarmOn   bool
	unblockAt time.Time // while the alarm is on, when to clear it
	alarmErr  error

	reasons map[string][]string // the x-acemq-error of each id's end copies the drain took
}

// deletion is what one deletion of a work queue may have taken with it.
type deletion struct {
	queue         string
	purged, rungs int
	prefetch      int
}

func newRabbitWorld(t *testing.T, node *brokertest.Node, url, vh string, l *ledger, scale time.Duration) *rabbitWorld {
	log := zap.NewNop()
	if os.Getenv("SOAK_LOG") != "" {
		log = zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel))
	}
	w := &rabbitWorld{t: t, node: node, url: url, vh: vh, scale: scale, l: l, log: log}
	w.h = &handler{l: l, clock: scaledClock{scale}, scripts: map[string]script{}}
	// The memory run's policies, scaled: the same split between waits in
	// the process (10 s, 20 s) and on the broker (40 s and more).
	w.classic = retry.Exponential(5, 10*time.Second/scale, 10*time.Minute/scale).WithJitter(0).
		WithBrokerWaitThreshold(30 * time.Second / scale)
	w.quorum = w.classic.WithDelayQueues(true)
	return w
}

// scaledClock is the wall clock with every wait divided by scale: the
// handlers' sleeps, drawn in simulated time, on RabbitMQ.
type scaledClock struct{ scale time.Duration }

func (c scaledClock) Now() time.Time                         { return time.Now() }
func (c scaledClock) After(d time.Duration) <-chan time.Time { return time.After(d / c.scale) }

// dial connects a transport as one process of the soak, closed at the
// test's end (a second Close is no error).
func (w *rabbitWorld) dial(name string) *rabbitmq.Transport {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wallWait)
	defer cancel()
	tr, err := rabbitmq.Dial(ctx, w.url,
		rabbitmq.WithLogger(w.log),
		rabbitmq.WithBackoff(20*time.Millisecond, 500*time.Millisecond),
		rabbitmq.WithConfirmTimeout(10*time.Second),
		rabbitmq.WithConnectionName("acemq-soak "+name))
	if err != nil {
		w.t.Fatalf("soak: dial %s: %v", name, err)
	}
	w.t.Cleanup(func() { _ = tr.Close() })
	return tr
}

const rabbitPrefetch = 16

// start runs a new server, as a process starting, on a transport of its
// own, and returns once it consumes every queue.
func (w *rabbitWorld) start() {
	w.t.Helper()
	mux := acemq.NewMux()
	for _, q := range workQueues {
		mux.HandleFunc(q, w.h.serve)
	}
	w.tr = w.dial("server")
	w.srv = &acemq.Server{
		Transport:      w.tr,
		Handler:        mux,
		Logger:         w.log,
		HandlerTimeout: handlerTimeout / w.scale,
		Concurrency:    4,
		Prefetch:       rabbitPrefetch,
		Queues: map[string]acemq.QueueConfig{
			classicQueue: {Retry: w.classic},
			quorumQueue:  {Retry: w.quorum, Args: map[string]any{"x-queue-type": "quorum"}, DeliveryLimit: 8},
		},
	}
	w.done = runUntilReady(w.t, w.srv)
}

// stop shuts the server down as a process stopping does, waiting for its
// handlers (a deaf one ignores its context, for a few seconds at most),
// then closes its transport, giving back what it still held.
func (w *rabbitWorld) stop() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wallWait)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- w.srv.Shutdown(ctx) }()
	var runErr error
	select {
	case runErr = <-w.done:
	case <-time.After(2 * wallWait):
		w.t.Fatalf("soak: Run did not return within %v of Shutdown", 2*wallWait)
	}
	<-shut
	if runErr != nil && !errors.Is(runErr, acemq.ErrServerClosed) && !errors.Is(runErr, acemq.ErrCutOff) {
		w.t.Errorf("soak: Run: %v", runErr)
	}
	_ = w.tr.Close()
}

// drain waits, within limit, until the run is settled: every id no
// deletion may have taken has an end (the dead letters and parked
// messages taken from their queues as they come), nothing is ready in a
// work queue, a rung or a delay queue, no handler runs, and no handler
// was called for a while (a few of the scaled retry waits).
func (w *rabbitWorld) drain(limit time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(limit)
	const still = 2 * time.Second
	lastCalls, since := -1, time.Now()
	for time.Now().Before(deadline) {
		for _, q := range workQueues {
			w.takeEnds(acemq.DeadLetterQueue(q), w.l.dlq)
			w.takeEnds(acemq.ParkedQueue(q), w.l.parked)
		}
		calls, open := w.counts()
		if calls != lastCalls {
			lastCalls, since = calls, time.Now()
		}
		ready := w.ready()
		if open == 0 && ready == 0 && w.h.running.Load() == 0 && w.h.sleeping.Load() == 0 && time.Since(since) >= still {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	calls, open := w.counts()
	w.t.Logf("soak: not settled within %v of the schedule's end: %d ids with no end, %d handler calls, %d ready in the queues", limit, open, calls, w.ready())
}

// takeEnds is take for a .dlq or .parked queue during the drain, keeping
// each copy's reason for the story of a duplicate.
func (w *rabbitWorld) takeEnds(q string, into map[string]int) {
	w.t.Helper()
	for {
		d, ok, err := w.pubTr.Get(context.Background(), q)
		if err != nil || !ok {
			return
		}
		id := deliveryID(d.Headers)
		w.l.add(into, id)
		reason, _ := d.Headers[acemq.HeaderError].(string)
		w.mu.Lock()
		if w.reasons == nil {
			w.reasons = map[string][]string{}
		}
		w.reasons[id] = append(w.reasons[id], q+": "+reason)
		w.mu.Unlock()
		if err := d.Ack(); err != nil {
			w.t.Fatalf("soak: ack a message taken from %s: %v", q, err)
		}
	}
}

// story is an id's history in the ledger, with its script and the reasons
// its dead letters and parked copies carry.
func (w *rabbitWorld) story(id string) string {
	w.h.mu.Lock()
	sc := w.h.scripts[id]
	w.h.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%s; script %s %v; %s", w.l.story(id), sc.kind, sc.sleep, strings.Join(w.reasons[id], "; "))
}

// endsByScript tells, for each script kind, where its ids ended: the
// story to hold against the memory run's for the same seed. A slow
// script longer than the handler timeout is a kind of its own: on
// RabbitMQ its context ends at the timeout, every attempt, and it is
// dead-lettered, exhausted.
func endsByScript(l *ledger, h *handler) string {
	h.mu.Lock()
	scripts := make(map[string]script, len(h.scripts))
	for id, sc := range h.scripts {
		scripts[id] = sc
	}
	h.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	by := map[string]map[string]int{}
	for _, id := range l.published {
		kind := scripts[id].kind
		if kind == "slow" && scripts[id].sleep > handlerTimeout {
			kind = "slow>timeout"
		}
		end := "none"
		switch {
		case l.handled[id] > 0 && l.dlq[id]+l.parked[id] > 0:
			end = "handled+other"
		case l.handled[id] > 0:
			end = "handled"
		case l.dlq[id] > 0 && l.parked[id] > 0:
			end = "dlq+parked"
		case l.dlq[id] > 0:
			end = "dlq"
		case l.parked[id] > 0:
			end = "parked"
		case l.held[id] > 0:
			end = "held"
		case l.destroyed[id] > 0:
			end = "destroyed"
		}
		if by[kind] == nil {
			by[kind] = map[string]int{}
		}
		by[kind][end]++
	}
	kinds := make([]string, 0, len(by))
	for k := range by {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, 0, len(kinds))
	for _, k := range kinds {
		parts = append(parts, k+" "+faultLine(by[k]))
	}
	return strings.Join(parts, "; ")
}

// counts returns the handler calls so far and the ids with no end that no
// deletion may have taken.
func (w *rabbitWorld) counts() (calls, open int) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	for _, c := range w.l.calls {
		calls += c
	}
	for _, id := range w.l.published {
		if w.l.handled[id]+w.l.dlq[id]+w.l.parked[id] == 0 && w.l.destroyed[id] == 0 {
			open++
		}
	}
	return calls, open
}

// ready counts what is ready in the work queues, the classic rungs and
// the delay queues (the undeliverable one included).
func (w *rabbitWorld) ready() int {
	qs := append([]string{}, workQueues...)
	for _, d := range w.classic.BrokerRungs() {
		qs = append(qs, retry.RungName(classicQueue, d))
	}
	qs = append(qs, delay.Queues()...)
	n := 0
	for _, q := range qs {
		if info, err := w.pubTr.Inspect(context.Background(), q); err == nil {
			n += info.Messages
		}
	}
	return n
}
