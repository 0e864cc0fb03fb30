package soak_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport"
)

// script is what the handler does with one message, drawn by the
// schedule when it is published.
type script struct {
	kind  string
	fails int           // kind "flaky": attempts that fail before one succeeds
	sleep time.Duration // kinds "slow" and "deaf": the virtual time the handler takes
}

// scripts are drawn by weight: mostly work that succeeds, some that fails
// a few times, and the answers and behaviours the soak wants to see.
var scripts = []struct {
	kind   string
	weight int
}{
	{"accept", 60}, {"flaky", 18}, {"hopeless", 3}, {"deadletter", 4},
	{"park", 4}, {"slow", 8}, {"deaf", 3},
}

// handlerTimeout is the servers' HandlerTimeout: a "deaf" handler sleeps
// past it, ignoring its context.
const handlerTimeout = 2 * time.Minute

func drawScript(r *rand.Rand) script {
	total := 0
	for _, s := range scripts {
		total += s.weight
	}
	n := r.IntN(total)
	kind := ""
	for _, s := range scripts {
		if n < s.weight {
			kind = s.kind
			break
		}
		n -= s.weight
	}
	sc := script{kind: kind}
	switch kind {
	case "flaky":
		sc.fails = 1 + r.IntN(3)
	case "slow":
		sc.sleep = time.Duration(1+r.IntN(180)) * time.Second
	case "deaf":
		sc.sleep = handlerTimeout + time.Duration(1+r.IntN(120))*time.Second
	}
	return sc
}

var errWarehouse = errors.New("soak: the warehouse is not answering")

// handler runs each message's script on the broker's virtual clock and
// writes the answers into the ledger.
type handler struct {
	l     *ledger
	clock transport.Clock // the memory broker's virtual clock, or RabbitMQ's run's scaled wall clock

	mu      sync.Mutex
	scripts map[string]script
	// abandoned are the deadlines of clock waits a handler stopped
	// waiting on (its context ended first): each still counts in the
	// clock's Pending until it fires, and quiet must not take it for a
	// delivery asleep.
	abandoned []time.Time
	sleeping  atomic.Int64 // handlers asleep on the clock, for a failure's story
	running   atomic.Int64 // handlers at work, not asleep
	// asleep are the handlers asleep on the clock now, by queue; one whose
	// delivery the broker took back (its connection closed, its queue
	// deleted) is orphaned: its wait counts in Pending with no unsettled
	// delivery to match it.
	asleep map[*sleeper]struct{}
}

type sleeper struct {
	queue    string
	orphaned bool
}

// sleep registers a handler asleep on queue until the returned func is
// called.
func (h *handler) sleep(queue string) func() {
	s := &sleeper{queue: queue}
	h.mu.Lock()
	if h.asleep == nil {
		h.asleep = map[*sleeper]struct{}{}
	}
	h.asleep[s] = struct{}{}
	h.mu.Unlock()
	h.sleeping.Add(1)
	h.running.Add(-1)
	return func() {
		h.running.Add(1)
		h.sleeping.Add(-1)
		h.mu.Lock()
		delete(h.asleep, s)
		h.mu.Unlock()
	}
}

// orphan marks the handlers asleep now on queue ("" every queue) as
// having lost their deliveries.
func (h *handler) orphan(queue string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.asleep {
		if queue == "" || s.queue == queue {
			s.orphaned = true
		}
	}
}

func (h *handler) orphanedSleepers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for s := range h.asleep {
		if s.orphaned {
			n++
		}
	}
	return n
}

// orphans counts the abandoned waits that have not fired yet.
func (h *handler) orphans(now time.Time) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := h.abandoned[:0]
	for _, t := range h.abandoned {
		if t.After(now) {
			kept = append(kept, t)
		}
	}
	h.abandoned = kept
	return len(kept)
}

func (h *handler) set(id string, s script) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.scripts[id] = s
}

func (h *handler) serve(ctx context.Context, m *acemq.Message) ack.Ack {
	h.mu.Lock()
	sc := h.scripts[m.ID()]
	h.mu.Unlock()
	h.running.Add(1)
	defer h.running.Add(-1)
	n := h.l.call(m.ID())
	a := h.answer(ctx, m.Queue(), sc, n)
	if a.Outcome() == ack.OutcomeAccept {
		h.l.add(h.l.handled, m.ID())
	}
	return a
}

func (h *handler) answer(ctx context.Context, queue string, sc script, n int) ack.Ack {
	switch sc.kind {
	case "flaky":
		if n <= sc.fails {
			return ack.Retry(errWarehouse)
		}
	case "hopeless":
		return ack.Retry(errWarehouse)
	case "deadletter":
		return ack.DeadLetter(errors.New("soak: the order names no customer"))
	case "park":
		return ack.Park(errors.New("soak: the order is for another warehouse"))
	case "slow":
		h.mu.Lock()
		due := h.clock.Now().Add(sc.sleep)
		wake := h.clock.After(sc.sleep)
		h.mu.Unlock()
		awake := h.sleep(queue)
		select {
		case <-wake:
			awake()
		case <-ctx.Done():
			awake()
			h.mu.Lock()
			h.abandoned = append(h.abandoned, due)
			h.mu.Unlock()
			return ack.Retry(ctx.Err())
		}
	case "deaf":
		awake := h.sleep(queue)
		<-h.clock.After(sc.sleep) // ignores ctx: it runs past HandlerTimeout and the shutdown
		awake()
	}
	return ack.Accept()
}
