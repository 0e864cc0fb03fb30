package soak_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/serverhook"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// The soak's two work queues: a classic queue whose long retries wait on
// rungs, and a quorum queue with a delivery limit whose long retries wait
// on the delay queues.
const (
	classicQueue = "soak.classic"
	quorumQueue  = "soak.quorum"
)

var workQueues = []string{classicQueue, quorumQueue}

// policies: waits of 10 s and 20 s in the process, 40 s and more in the
// broker; no jitter, so that a seed's schedule is the same every run.
var (
	classicPolicy = retry.Exponential(5, 10*time.Second, 10*time.Minute).WithJitter(0)
	quorumPolicy  = retry.Exponential(5, 10*time.Second, 10*time.Minute).WithJitter(0).WithDelayQueues(true)
)

// wallWait bounds each real-time wait of the soak (quiet, a restart).
const wallWait = 60 * time.Second

// world is the broker, the running server (restarted as a process is) and
// the publish faults the schedule arms.
type world struct {
	t      *testing.T
	broker *memory.Broker
	clock  *memory.Clock
	h      *handler
	log    *zap.Logger

	conn *memory.Conn
	srv  *acemq.Server
	done chan error

	faultMu sync.Mutex
	faults  []memory.Fault // given, one each, to the next publishes

	slack reading // the counts last seen with more waits than deliveries

	events []string // the last things the schedule did, for a failure's story
}

// note keeps what the schedule just did, for the story of a failure.
func (w *world) note(format string, args ...any) {
	w.events = append(w.events, fmt.Sprintf("%v ", w.clock.Now().Sub(memory.Epoch))+fmt.Sprintf(format, args...))
	if len(w.events) > 40 {
		w.events = w.events[len(w.events)-40:]
	}
}

func newWorld(t *testing.T, l *ledger) *world {
	b := memory.New()
	w := &world{t: t, broker: b, clock: b.Clock(), log: zap.NewNop()}
	if os.Getenv("SOAK_LOG") != "" {
		w.log, _ = zap.NewDevelopment()
	}
	w.h = &handler{l: l, clock: b.Clock(), scripts: map[string]script{}}
	b.SetPublishFault(w.nextFault)
	w.start()
	return w
}

// nextFault gives the armed faults to the next publishes, the library's
// and the publishers' alike.
func (w *world) nextFault(transport.Publishing) memory.Fault {
	w.faultMu.Lock()
	defer w.faultMu.Unlock()
	if len(w.faults) == 0 {
		return memory.Deliver
	}
	f := w.faults[0]
	w.faults = w.faults[1:]
	return f
}

func (w *world) arm(f memory.Fault, n int) {
	w.faultMu.Lock()
	defer w.faultMu.Unlock()
	for range n {
		w.faults = append(w.faults, f)
	}
}

func (w *world) disarm() {
	w.faultMu.Lock()
	defer w.faultMu.Unlock()
	w.faults = nil
}

// start runs a new server, as a process starting, on a connection of its
// own, and returns once it consumes every queue.
func (w *world) start() {
	w.t.Helper()
	mux := acemq.NewMux()
	for _, q := range workQueues {
		mux.HandleFunc(q, w.h.serve)
	}
	w.conn = w.broker.Connect()
	w.srv = &acemq.Server{
		Transport:      w.conn,
		Handler:        mux,
		Logger:         w.log,
		HandlerTimeout: handlerTimeout,
		Concurrency:    4,
		Prefetch:       16,
		Queues: map[string]acemq.QueueConfig{
			classicQueue: {Retry: classicPolicy},
			quorumQueue:  {Retry: quorumPolicy, Args: map[string]any{"x-queue-type": "quorum"}, DeliveryLimit: 8},
		},
	}
	w.done = runUntilReady(w.t, w.srv)
}

// stop shuts the server down as a process stopping does: handlers still
// asleep on the virtual clock (a deaf one ignores its context) are woken
// by moving the clock, timer by timer, until Run returns; then its
// connection closes, giving back what it still held.
func (w *world) stop() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wallWait)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- w.srv.Shutdown(ctx) }()
	deadline := time.After(wallWait)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var runErr error
wait:
	for {
		select {
		case runErr = <-w.done:
			break wait
		case <-deadline:
			w.t.Fatalf("soak: Run did not return within %v of Shutdown", wallWait)
		case <-tick.C:
			if next, ok := w.clock.Next(); ok {
				w.clock.Advance(max(next.Sub(w.clock.Now()), 0))
			}
		}
	}
	<-shut
	// The process is down until every wait it left on the clock has
	// fired (a retry it held, a handler's abandoned sleep): a restart
	// takes that long, and the next server's quiet then counts only its
	// own waits.
	for w.clock.Pending() > 0 {
		next, ok := w.clock.Next()
		if !ok {
			w.t.Fatalf("soak: %d waits pending on the clock with no timer", w.clock.Pending())
		}
		w.clock.Advance(max(next.Sub(w.clock.Now()), 0))
	}
	if runErr != nil && !errors.Is(runErr, acemq.ErrServerClosed) && !errors.Is(runErr, acemq.ErrCutOff) {
		w.t.Errorf("soak: Run: %v", runErr)
	}
	w.conn.Close()
}

// restart is a process restart: Shutdown, then a new Server.
func (w *world) restart() {
	w.stop()
	w.start()
}

// quiet waits, in real time, until the server is quiet as acemqtest
// defines it: ready, and every delivery it holds asleep on the virtual
// clock (a retry held in the process, a handler waiting), so that moving
// the clock is the next thing that can happen.
func (w *world) quiet() {
	w.t.Helper()
	deadline := time.Now().Add(wallWait)
	pause := 20 * time.Microsecond
	for {
		busy := w.busy()
		if busy == "" {
			return
		}
		select {
		case err := <-w.done:
			w.t.Fatalf("soak: the server stopped: Run returned %v", err)
		default:
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("soak: the server is not quiet after %v at %v: %s (handlers asleep %d); the last events:\n%s",
				wallWait, w.clock.Now().Sub(memory.Epoch), busy, w.h.sleeping.Load(), strings.Join(w.events, "\n"))
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

func (w *world) busy() string {
	if err := w.srv.CheckReady(); err != nil && !w.awaitingOnTheClock(err) {
		return err.Error()
	}
	return w.working()
}

// awaitingOnTheClock says whether the server is not ready only because a
// queue deleted under it, declared again, waits for the handlers still
// running on its old subscription (engine.ErrAwaitingHandlers; the
// engine says any other trouble first) while something waits on the
// virtual clock: those handlers may be asleep on it, and return only once
// it moves, so the server is quiet if nothing else works. With nothing on
// the clock they return in real time, and the server is busy until
// consumed again.
func (w *world) awaitingOnTheClock(err error) bool {
	_, pending := w.clock.Next()
	return pending && errors.Is(err, engine.ErrAwaitingHandlers)
}

// working says which deliveries are not asleep on the clock, or "".
func (w *world) working() string {
	held, ok := 0, true
	e := serverhook.Engine(w.srv)
	var moves uint64
	if e != nil {
		moves = e.Moves()
		held, ok = e.Waiting()
	}
	if !ok {
		return "a delivery prefetched while a worker is free to take it"
	}
	unacked := 0
	for _, q := range workQueues {
		unacked += w.broker.Unacked(q)
	}
	// A handler whose delivery the broker took back (orphaned) sleeps on
	// the clock with no delivery of its own; the broker's redelivery of
	// its message waits for it, in the engine, on the wall clock
	// (awaitRunning), and ends when it ends: the pair counts once, and
	// before the redelivery arrives the orphan counts alone.
	asleep := w.clock.Pending() - w.h.orphans(w.clock.Now())
	orphaned := w.h.orphanedSleepers()
	if e != nil && e.Moves() != moves {
		return "the server's workers moved while it was looked at"
	}
	working := unacked - held
	if working <= asleep && working >= asleep-orphaned {
		w.slack = reading{}
		return ""
	}
	busy := fmt.Sprintf("%d messages delivered and not settled (%d held behind a busy worker), %d asleep on the virtual clock (%d of them handlers whose delivery the broker took back)",
		unacked, held, asleep, orphaned)
	// The counts disagree in two ways the soak cannot see into, and the
	// server is then taken as quiet once no handler of the soak runs and
	// the counts stand still for stillFor of real time:
	//   - more waits than deliveries: a wait of the engine's whose
	//     delivery the broker took back (a closed connection, a deleted
	//     queue) counts in Pending until it fires;
	//   - more deliveries than waits: a second message with the id of one
	//     whose handler runs (a publish whose confirm was lost, sent
	//     again) waits for that handler, on the wall clock
	//     (engine awaitRunning), and ends when it ends.
	// A copy the engine publishes again with backoff (nacked, blocked,
	// refused) stands still too, for a while: moving the clock then makes
	// the schedule a little less exact, and nothing less true.
	if w.h.running.Load() != 0 {
		return busy + "; a handler runs"
	}
	now := reading{unacked: unacked, pending: w.clock.Pending(), moves: moves, at: w.clock.Now()}
	if w.slack.since.IsZero() || !w.slack.same(now) {
		now.since = time.Now()
		w.slack = now
		return busy + "; waiting for the counts to stand still"
	}
	if time.Since(w.slack.since) < stillFor {
		return busy + "; waiting for the counts to stand still"
	}
	return ""
}

// advanceTo moves the virtual clock to at, timer by timer, the server
// quiet before each, so that everything due on the way happens in order.
func (w *world) advanceTo(at time.Time) {
	w.t.Helper()
	for {
		w.quiet()
		next, ok := w.clock.Next()
		if !ok || next.After(at) {
			break
		}
		w.clock.Advance(max(next.Sub(w.clock.Now()), 0))
	}
	w.clock.Advance(max(at.Sub(w.clock.Now()), 0))
	w.quiet()
}

// drainUntilIdle runs the clock until no timer is left, or until limit of
// virtual time has passed (a dead letter held at least once is offered
// again every three minutes for ever).
func (w *world) drainUntilIdle(limit time.Duration) {
	w.t.Helper()
	end := w.clock.Now().Add(limit)
	for {
		w.quiet()
		next, ok := w.clock.Next()
		if !ok || next.After(end) {
			return
		}
		w.clock.Advance(max(next.Sub(w.clock.Now()), 0))
	}
}

// redeclared waits until the server has declared q again after the
// schedule deleted it. The engine declares it at once, and consumes it
// again once every worker of the cancelled subscription has ended (a
// finding of the soak, issue 29: it used to declare it only then, so a
// handler asleep on the clock kept the queue deleted until its wait
// ended; TestSoakRegressionDeletedQueueDeclaredAgainAtOnce). Should the
// declare fail, the supervisor declares it after the workers end, so the
// clock is moved while every delivery is asleep.
func (w *world) redeclared(q string) {
	w.t.Helper()
	deadline := time.Now().Add(wallWait)
	for {
		if _, ok := w.broker.Queue(q); ok {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("soak: the server did not declare %s again within %v of its deletion", q, wallWait)
		}
		time.Sleep(time.Millisecond)
		if next, ok := w.clock.Next(); ok && w.asleep() {
			w.clock.Advance(max(next.Sub(w.clock.Now()), 0))
		}
	}
}

// asleep reports whether every delivery of the server is asleep on the
// clock, ready or not: quiet but for the queues it is consuming again.
func (w *world) asleep() bool { return w.working() == "" }

// stillFor is how long, in real time, the counts must stand still for a
// server with more waits than deliveries to be taken as quiet.
const stillFor = 5 * time.Millisecond

// reading is one look at the counts quiet compares.
type reading struct {
	unacked, pending int
	moves            uint64
	at               time.Time // the virtual clock's
	since            time.Time // the wall clock's, when first seen
}

func (r reading) same(o reading) bool {
	return r.unacked == o.unacked && r.pending == o.pending && r.moves == o.moves && r.at.Equal(o.at)
}

// undelivered waits for the server to send round what the delay queues
// found no destination for (acemq.delay.v1.undeliverable, a queue deleted
// while its messages waited), then runs the clock to idle again. The
// server does it every acemq.RedeliverEvery on the wall clock, from its
// start: a schedule that restarts the process more often than that never
// sees a pass, so the end of the soak waits for one (a real wait of up to
// 10 s, only when something is there).
func (w *world) undelivered() {
	w.t.Helper()
	for range 3 {
		if w.broker.Depth(delay.Undeliverable) == 0 {
			return
		}
		deadline := time.Now().Add(3 * acemq.RedeliverEvery)
		for w.broker.Depth(delay.Undeliverable) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		w.drainUntilIdle(24 * time.Hour)
	}
}

// runUntilReady runs srv and returns once it has subscribed every queue;
// the channel gets what Run returns.
func runUntilReady(t *testing.T, srv *acemq.Server) chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("soak: Run returned before it subscribed: %v", err)
	case <-time.After(wallWait):
		t.Fatalf("soak: the server did not subscribe within %v", wallWait)
	}
	return done
}
