package soak_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// faultKinds are the faults the schedule injects, by weight.
var faultKinds = []struct {
	kind   string
	weight int
}{
	{"connections-closed", 14}, {"nack", 12}, {"unconfirmed", 12}, {"dropped", 8},
	{"blocked", 10}, {"consumers-cancelled", 12}, {"queue-deleted", 4}, {"restart", 8},
}

func drawFault(r *rand.Rand) string {
	total := 0
	for _, f := range faultKinds {
		total += f.weight
	}
	n := r.IntN(total)
	for _, f := range faultKinds {
		if n < f.weight {
			if slices.Contains(strings.Split(*withoutFlag, ","), f.kind) {
				return "none"
			}
			return f.kind
		}
		n -= f.weight
	}
	return faultKinds[0].kind
}

// exp draws an exponential wait of the given mean: arrivals at random, as
// a service's traffic and faults come.
func exp(r *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(r.ExpFloat64() * float64(mean))
}

// TestSoak is issue 29's compressed soak: -soak.duration of simulated
// traffic (publishes at random, -soak.interval apart on average, on two
// work queues) with faults injected at random (-soak.fault-every apart on
// average), then every id accounted for. lost must be 0; duplicates are
// counted. It prints a SOAK line with the seed that replays it.
func TestSoak(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	wallStart := time.Now()
	t.Logf("soak seed %d (replay with -soak.seed=%d)", seed, seed)
	defer func() {
		if t.Failed() {
			fmt.Printf("SOAK FAILED seed=%d (replay: go test ./test/soak/ -run TestSoak -soak.seed=%d -soak.duration=%v)\n", seed, seed, *durationFlag)
		}
	}()

	l := newLedger()
	w := newWorld(t, l)
	defer w.broker.Close()
	pubConn := w.broker.Connect()
	defer pubConn.Close()
	pub := &acemq.Publisher{Transport: pubConn, Mandatory: true}

	start := w.clock.Now()
	sched := newSchedule(seed, start, *durationFlag)
	faults := map[string]int{}
	for {
		st, ok := sched.next()
		if !ok {
			break
		}
		w.advanceTo(st.at)
		if st.fault == "" {
			w.h.set(st.id, st.script)
			w.note("publish %s to %s: %s %v", st.id, st.queue, st.script.kind, st.script.sleep)
			publish(t, pub, l, st.id, st.queue)
			continue
		}
		kind := st.fault
		if kind != "none" {
			faults[kind]++
		}
		w.note("fault %s", kind)
		w.inject(st, l)
	}

	// The schedule is over: no more faults, everything that waits is let
	// run to its end, then the last process stops and the queues are
	// counted.
	w.disarm()
	w.drainUntilIdle(24 * time.Hour)
	w.undelivered()
	simulated := w.clock.Now().Sub(start)
	w.stop()
	collect(t, pubConn, l, classicPolicy)
	heldDL := 0
	for _, q := range workQueues {
		heldDL += w.broker.DeadLettering(q)
	}

	f := l.figures()
	line := fmt.Sprintf("SOAK simulated=%v messages=%d handled=%d dlq=%d parked=%d held=%d destroyed=%d lost=%d duplicates=%d faults=%s (%d) seed=%d wall=%v",
		simulated.Round(time.Second), f.published, f.handled, f.dlq, f.parked, f.held, f.destroyed, f.lost, f.duplicates,
		faultLine(faults), total(faults), seed, time.Since(wallStart).Round(time.Millisecond))
	fmt.Println(line)
	t.Log(line)
	if heldDL > 0 {
		t.Logf("soak: %d dead letters held by the quorum queues' at-least-once dead-lettering", heldDL)
	}
	if f.duplicates > 0 {
		t.Logf("soak: duplicates: %v", head(f.duplicateIDs))
	}
	checkEnds(t, f, seed, l.story)
}

// publish sends id to q through an acemq.Publisher as a service does: an
// error (nacked, blocked, unconfirmed) is tried again, so that a message
// counts as published once the service would believe it sent. The faults
// armed are finite, so the loop ends.
func publish(t *testing.T, pub *acemq.Publisher, l *ledger, id, q string) {
	t.Helper()
	l.publish(id, q)
	for try := 0; ; try++ {
		_, err := pub.Publish(context.Background(), acemq.Outgoing{ID: id, RoutingKey: q, Body: []byte(`{"order":"` + id + `"}`)})
		if err == nil {
			return
		}
		if try > 100 {
			t.Fatalf("soak: publish %s to %s: %v (after %d tries)", id, q, err, try)
		}
	}
}

// inject makes the fault of st happen now.
func (w *world) inject(st step, l *ledger) {
	switch st.fault {
	case "connections-closed":
		w.h.orphan("") // before: a handler may not fall asleep in between unmarked
		w.broker.CloseConnections()
	case "nack":
		w.arm(memory.Nack, st.n)
	case "unconfirmed":
		w.arm(memory.LoseConfirm, st.n)
	case "dropped":
		w.arm(memory.Drop, st.n)
	case "blocked":
		w.arm(memory.Block, st.n)
	case "consumers-cancelled":
		w.broker.CancelConsumers(st.target)
	case "queue-deleted":
		// What the queue holds ready is gone by the operator's hand:
		// counted apart, never as lost. What the server holds it settles.
		q := st.target
		w.atRisk(q, l)
		w.h.orphan(q)
		w.broker.DeleteQueue(q)
		w.redeclared(q)
	case "restart":
		w.restart()
	}
}

func deliveryID(h map[string]any) string {
	s, _ := h[acemq.HeaderID].(string)
	return s
}

// collect takes everything left in the soak's queues into the ledger: the
// dead letters and parked messages as ends, the rest as held; classic is
// the classic queue's policy, whose rungs are looked in.
func collect(t *testing.T, conn transport.Transport, l *ledger, classic retry.Policy) {
	t.Helper()
	for _, q := range workQueues {
		take(t, conn, acemq.DeadLetterQueue(q), l, l.dlq, false)
		take(t, conn, acemq.ParkedQueue(q), l, l.parked, false)
	}
	// Rungs and delay queues first: what expires from them meanwhile is
	// then found in its work queue.
	var rest []string
	for _, d := range classic.BrokerRungs() {
		rest = append(rest, retry.RungName(classicQueue, d))
	}
	rest = append(rest, delay.Queues()...)
	rest = append(rest, workQueues...)
	for _, q := range rest {
		take(t, conn, q, l, l.held, true)
	}
}

func take(t *testing.T, conn transport.Transport, q string, l *ledger, into map[string]int, held bool) {
	t.Helper()
	for {
		d, ok, err := conn.Get(context.Background(), q)
		if err != nil || !ok {
			return // a missing queue holds nothing
		}
		l.add(into, deliveryID(d.Headers))
		if held {
			t.Logf("soak: left in %s at the end: %s (redelivered %v)", q, deliveryID(d.Headers), d.Redelivered)
		}
		if err := d.Ack(); err != nil {
			t.Fatalf("soak: ack a message taken from %s: %v", q, err)
		}
	}
}

func faultLine(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(parts, ",")
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func head(s []string) []string {
	return s[:min(len(s), 10)]
}

// atRisk marks as destroyed by the deletion of q what it may take with
// it, as test/faults' work-queue-deleted counts "no more than the queue
// held and the server had been sent": the ids q holds ready, those the
// server holds from it (delivered, unacked: RabbitMQ drops them with the
// queue, and the server's copy of one it held for a retry may never be
// placed), and those on q's rungs, which expire into the default exchange
// and are dropped while q is missing. An id counted here that reaches an
// end after all is not destroyed.
func (w *world) atRisk(q string, l *ledger) {
	elsewhere := map[string]bool{}
	var others []string
	for _, o := range workQueues {
		if o != q {
			others = append(others, o)
		}
	}
	others = append(others, delay.Queues()...)
	for _, o := range others {
		for _, d := range w.broker.Peek(o) {
			elsewhere[deliveryID(d.Headers)] = true
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range l.published {
		if l.queue[id] != q || elsewhere[id] || l.handled[id]+l.dlq[id]+l.parked[id] > 0 {
			continue
		}
		l.destroyed[id]++
	}
}
