package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/slip"
	"github.com/acemq/acemq/transport"
)

// slipKill's shape: slips started, consumer processes, and a SIGKILL of
// one of them (a new one started in its place) every slipKillEvery units
// of work done (rows in the effects table).
const (
	slipKillSlips = 300
	slipKillProcs = 2
	slipKillEvery = 40
)

// TestSlipKill is issue 27's fault scenario: 300 routing slips through
// three stops (stock.reserve → card.charge → shipping.ship, with
// stock.release and card.refund undoing the first two), served by two
// consumer processes (TestHelperConsumer, mode "slip": runSlipConsumer)
// on classic queues with the suite's ladder, one of which is killed with
// SIGKILL every slipKillEvery units of work and replaced, until every slip
// has settled. Some slips fail for good by their script (fatal) at each
// stop, so compensation runs under the kills too; some stops and
// compensations fail once first (a retry on the ladder). Each stop does
// its work in the transaction that claims the hop's x-acemq-id
// (idempotency.Postgres.ClaimTx), so a redelivered hop is recognised.
//
// Every slip is accounted for from what the broker and the database hold
// (a plain amqp091-go client, the slip header read as the wire contract's
// JSON, not by package slip): completed (its completed event, the three
// stops' work, no compensation), faulted and compensated (its faulted
// event, the work of the stops before the one that failed, every
// compensation they registered done, the failing stop's dead letter),
// half-compensated (anything else that ran part of an undo: must be 0),
// lost (no event, in no queue: must be 0).
func TestSlipKill(t *testing.T) {
	t.Parallel()
	const name = "slip-kill"
	pgURL := brokertest.PostgresURL(t)
	pool := brokertest.OpenPool(t, pgURL, brokertest.PoolConfig{})
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	effectsTable, storeTable := newTables(t, pool)
	eff := effects{pool: pool, table: effectsTable}
	log := testLogger(t)
	prefix := "faults." + name
	queue := func(n string) string { return prefix + "." + n }
	events := queue("events")
	pol := testPolicy()
	pubTr := dial(t, url, log)
	for _, n := range append(slices.Clone(slipStops), slipCompensations...) {
		if err := pubTr.Declare(context.Background(), acemq.Topology(queue(n), pol, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pubTr.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: events, Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	env := []string{envPostgres + "=" + pgURL, envEffects + "=" + effectsTable, envStore + "=" + storeTable}
	var consumers []*child
	for range slipKillProcs {
		consumers = append(consumers, startConsumer(t, "slip", url, prefix, env...))
	}
	// allConsuming waits until every consumer has started its server
	// (it says so when it consumes every queue), so that each kill lands
	// on a consumer at work, not on one still starting.
	allConsuming := func() {
		for _, c := range consumers {
			polltest.Within(t, 60*time.Second, fmt.Sprintf("consumer %d consumes the slip's queues", c.cmd.Process.Pid), func() bool {
				b, err := os.ReadFile(c.out)
				return err == nil && strings.Contains(string(b), "acemq: server started")
			})
		}
	}
	allConsuming()

	orders := slipOrders(name, slipKillSlips)
	stats := &publishStats{}
	started := make(chan int, 1)
	go func() { started <- startSlips(t, pubTr, prefix, events, orders, stats) }()

	seen := newSlipSeen(url)
	watched := []string{events}
	for _, n := range append(slices.Clone(slipStops), slipCompensations...) {
		watched = append(watched, acemq.DeadLetterQueue(queue(n)), acemq.ParkedQueue(queue(n)))
	}
	settled := func() bool {
		seen.poll(watched...)
		return seen.settled(orders)
	}
	began := time.Now()
	kills, next := 0, slipKillEvery
	work := func() int {
		n := 0
		for _, c := range eff.counts(t) {
			n += c
		}
		return n
	}
	for {
		if !polltest.UntilEvery(90*time.Second, 100*time.Millisecond, func() bool { return settled() || work() >= next }) {
			t.Errorf("%s: neither settled nor %d units of work done within 90s (at %d)", name, next, work())
			break
		}
		if settled() {
			break
		}
		slot := kills % len(consumers)
		pid := consumers[slot].cmd.Process.Pid
		consumers[slot].kill(t, syscall.SIGKILL)
		kills++
		t.Logf("%s: at %s: consumer %d killed with SIGKILL at %d units of work; another started in its place",
			name, time.Since(began).Round(100*time.Millisecond), pid, work())
		consumers[slot] = startConsumer(t, "slip", url, prefix, env...)
		allConsuming()
		next = work() + slipKillEvery
	}
	n := <-started
	t.Logf("%s: %d slips started in %s; producer: %s", name, n, time.Since(began).Round(100*time.Millisecond), stats)
	t.Logf("%s: settled in %s", name, time.Since(began).Round(100*time.Millisecond))
	for _, c := range consumers {
		c.kill(t, syscall.SIGTERM)
	}
	// What is left anywhere: events, dead letters and parked ones that
	// came since, and copies still in the work queues or on their rungs.
	seen.poll(watched...)
	var left []string
	for _, n := range append(slices.Clone(slipStops), slipCompensations...) {
		for _, d := range pol.BrokerRungs() {
			left = append(left, retry.RungName(queue(n), d))
		}
		left = append(left, queue(n))
	}
	seen.poll(left...)
	r := seen.account(t, orders, queue, eff.counts(t))
	r.kills = kills
	r.report(t, name)
}

// slipOrders are the n slips' scripts: one in thirteen fails for good at
// stock.reserve (nothing to undo), of the others one in eleven at
// card.charge (the reservation released) and one in seven at
// shipping.ship (the refund, then the release); one in five charges fail
// once, one in six releases and one in nine refunds.
func slipOrders(prefix string, n int) map[string]slipOrder {
	out := make(map[string]slipOrder, n)
	for i := range n {
		o := slipOrder{N: i}
		switch {
		case i%13 == 6:
			o.FailAt = slipReserve
		case i%11 == 5:
			o.FailAt = slipCharge
		case i%7 == 3:
			o.FailAt = slipShip
		}
		for _, f := range []struct {
			every, at int
			stop      string
		}{{5, 1, slipCharge}, {6, 2, slipRelease}, {9, 4, slipRefund}} {
			if i%f.every == f.at {
				o.Flaky = append(o.Flaky, f.stop)
			}
		}
		out[fmt.Sprintf("%s-%04d", prefix, i)] = o
	}
	return out
}

// startSlips starts every slip of orders from two goroutines, each Start
// retried until the broker confirms it, and returns how many were.
func startSlips(t *testing.T, tr transport.Transport, prefix, events string, orders map[string]slipOrder, stats *publishStats) int {
	c := &slip.Courier{Publisher: &acemq.Publisher{Transport: tr}}
	var stops []string
	for _, s := range slipStops {
		stops = append(stops, prefix+"."+s)
	}
	ids := make(chan string)
	var mu sync.Mutex
	confirmed := 0
	var wg sync.WaitGroup
	deadline := time.Now().Add(90 * time.Second)
	for range 2 {
		wg.Go(func() {
			for id := range ids {
				b, _ := json.Marshal(orders[id])
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					_, err := c.Start(ctx, slip.Itinerary{ID: id, Name: "fulfil-order", Stops: stops,
						Variables: map[string]any{"order": orders[id].N},
						Completed: slip.ToQueue(events), Faulted: slip.ToQueue(events)},
						acemq.Outgoing{Body: b, ContentType: "application/json"})
					cancel()
					if err == nil {
						mu.Lock()
						confirmed++
						mu.Unlock()
						break
					}
					stats.fail(err)
					if time.Now().After(deadline) {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(40 * time.Millisecond) // a steady arrival, for the kills to land among

			}
		})
	}
	for _, id := range slices.Sorted(mapsKeys(orders)) {
		ids <- id
	}
	close(ids)
	wg.Wait()
	if confirmed != len(orders) {
		t.Errorf("only %d of %d slips were ever started: %s", confirmed, len(orders), stats)
	}
	return confirmed
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// slipDoc is the part of a slip's document (docs/wire-contract.md,
// "Routing slips (v1)") the accounting reads, decoded here rather than by
// package slip: the wire form is what is checked.
type slipDoc struct {
	V         int    `json:"v"`
	ID        string `json:"id"`
	State     string `json:"state"`
	Itinerary []string
	Visited   []struct {
		Stop string `json:"stop"`
	} `json:"visited"`
	Compensations []struct {
		Queue string `json:"queue"`
	} `json:"compensations"`
	Compensated []struct {
		Queue string `json:"queue"`
	} `json:"compensated"`
	Fault *slipFault `json:"fault"`
}

// slipMsg is one slip message the accounting took from a queue.
type slipMsg struct {
	queue, hop, event, reason string
	doc                       slipDoc
}

// slipSeen is every slip message taken from the queues watched, by slip
// id; messages with no readable slip under "".
type slipSeen struct {
	url string
	mu  sync.Mutex
	by  map[string][]slipMsg
}

func newSlipSeen(url string) *slipSeen { return &slipSeen{url: url, by: map[string][]slipMsg{}} }

// poll takes what queues hold now, on one channel; a broker that is away
// is tried again at the next poll.
func (s *slipSeen) poll(queues ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = raw(s.url, func(ch *amqp.Channel) error {
		for _, q := range queues {
			for {
				d, ok, err := ch.Get(q, false)
				if err != nil {
					var ae *amqp.Error
					if errors.As(err, &ae) && ae.Code == amqp.NotFound {
						return nil // a rung that was never declared: the channel is gone
					}
					return err
				}
				if !ok {
					break
				}
				m := slipMsg{queue: q}
				m.hop, _ = d.Headers[acemq.HeaderID].(string)
				m.event, _ = d.Headers[slip.EventHeader].(string)
				m.reason, _ = d.Headers["x-acemq-error"].(string)
				if v, ok := d.Headers[slip.Header].(string); !ok || json.Unmarshal([]byte(v), &m.doc) != nil {
					m.doc = slipDoc{}
				}
				s.by[m.doc.ID] = append(s.by[m.doc.ID], m)
				if err := d.Ack(false); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// settled reports whether every slip of orders has reached its end: an
// event, and for a faulted one the dead letter of the stop that failed.
func (s *slipSeen) settled(orders map[string]slipOrder) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range orders {
		// The stop whose dead letter must be there: where the faulted
		// event says the slip failed.
		var event bool
		failed := ""
		dead := map[string]bool{}
		for _, m := range s.by[id] {
			event = event || m.event != ""
			if m.event != "" && m.doc.Fault != nil {
				failed = m.doc.Fault.Stop
			}
			dead[m.queue] = true
		}
		if !event || (failed != "" && !dead[acemq.DeadLetterQueue(failed)]) {
			return false
		}
	}
	return true
}

// slipResult is what the accounting found.
type slipResult struct {
	slips, completed, faulted, compensated, half, lost, unexpected int
	duplicateEffects, duplicateEvents, deadlettered, extraDead     int
	parked, queued, kills                                          int
	problems                                                       []string
}

func (r *slipResult) problem(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// account classifies every slip from its messages and effects.
func (s *slipSeen) account(t *testing.T, orders map[string]slipOrder, queue func(string) string, effects map[string]int) *slipResult {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &slipResult{slips: len(orders)}
	for _, m := range s.by[""] {
		r.problem("a message in %s without a readable slip (x-acemq-id %q)", m.queue, m.hop)
	}
	for k, n := range effects {
		if n > 1 {
			r.duplicateEffects += n - 1
			r.problem("the work %q was done %d times", k, n)
		}
	}
	for _, id := range slices.Sorted(mapsKeys(orders)) {
		o := orders[id]
		done := func(stop string) bool { return effects[id+" "+stop] > 0 }
		var evs []slipMsg
		var dead, parked, queued int
		for _, m := range s.by[id] {
			switch {
			case m.queue == queue("events"):
				evs = append(evs, m)
			case strings.HasSuffix(m.queue, ".dlq"):
				dead++
				if m.queue != acemq.DeadLetterQueue(queue(o.FailAt)) || o.FailAt == "" {
					r.unexpected++
					r.problem("%s: a dead letter in %s, the script fails it at %q: %s", id, m.queue, o.FailAt, m.reason)
				}
			case strings.HasSuffix(m.queue, ".parked"):
				parked++
				r.problem("%s: parked in %s: %s", id, m.queue, m.reason)
			default:
				queued++
			}
		}
		if dead > 0 {
			r.deadlettered++
			r.extraDead += dead - 1
		}
		r.parked += parked
		if len(evs) > 1 {
			r.duplicateEvents += len(evs) - 1
		}
		if len(evs) == 0 {
			if dead+parked+queued == 0 {
				r.lost++
				r.problem("%s: lost: no event, in no queue (work done: %v)", id, s.workOf(id, effects))
			} else {
				r.queued++
				r.problem("%s: not settled: no event, %d dead letters, %d parked, %d queued", id, dead, parked, queued)
			}
			continue
		}
		if queued > 0 {
			r.problem("%s: %d copies left in the work queues after it settled (duplicate hops)", id, queued)
		}
		kinds := map[string]bool{}
		for _, e := range evs {
			kinds[e.event] = true
			if e.doc.State != e.event {
				r.problem("%s: a %s event whose slip is %s", id, e.event, e.doc.State)
			}
			if e.hop != id+"."+e.event {
				r.problem("%s: a %s event with the id %q", id, e.event, e.hop)
			}
		}
		ev := evs[0].doc
		compWork := done(slipRelease) || done(slipRefund)
		switch {
		case len(kinds) > 1:
			r.half++
			r.problem("%s: events of more than one kind: %v", id, slices.Sorted(mapsKeys(kinds)))
		case kinds[slip.StateCompleted]:
			r.completed++
			var visited []string
			for _, v := range ev.Visited {
				visited = append(visited, v.Stop)
			}
			want := []string{queue(slipReserve), queue(slipCharge), queue(slipShip)}
			if !done(slipReserve) || !done(slipCharge) || !done(slipShip) || !slices.Equal(visited, want) {
				r.problem("%s: completed, yet its work is %v and it visited %v", id, s.workOf(id, effects), visited)
			}
			if compWork || len(ev.Compensated) != 0 {
				r.half++
				r.problem("%s: completed, yet something was undone: %v", id, s.workOf(id, effects))
			}
			if o.FailAt != "" {
				r.unexpected++
				r.problem("%s: completed, yet its script fails it at %s", id, o.FailAt)
			}
		case kinds[slip.StateFaulted]:
			r.faulted++
			// What its stops registered, by the stop that failed, the
			// last registered run first.
			var wantComp []string
			var wantWork []string
			switch ev.Fault.stopOr() {
			case queue(slipShip):
				wantComp, wantWork = []string{slipRefund, slipRelease}, []string{slipReserve, slipCharge}
			case queue(slipCharge):
				wantComp, wantWork = []string{slipRelease}, []string{slipReserve}
			}
			var ran []string
			for _, c := range ev.Compensated {
				ran = append(ran, strings.TrimPrefix(c.Queue, prefixOf(queue)))
			}
			whole := slices.Equal(ran, wantComp) || (len(ran) == 0 && len(wantComp) == 0)
			for _, c := range slipCompensations {
				if done(c) != slices.Contains(wantComp, c) {
					whole = false
				}
			}
			for _, st := range slipStops {
				if done(st) != slices.Contains(wantWork, st) {
					r.problem("%s: faulted at %s, yet the work of %s done: %v", id, ev.Fault.stopOr(), st, done(st))
				}
			}
			if whole {
				r.compensated++
			} else {
				r.half++
				r.problem("%s: faulted at %s: compensated %v, want %v; its work %v", id, ev.Fault.stopOr(), ran, wantComp, s.workOf(id, effects))
			}
			if queue(o.FailAt) != ev.Fault.stopOr() {
				r.unexpected++
				r.problem("%s: faulted at %s (%s), its script fails it at %q", id, ev.Fault.stopOr(), ev.Fault.reasonOr(), o.FailAt)
			}
		default: // half-compensated
			r.faulted++
			r.half++
			r.problem("%s: a %v event: %+v", id, slices.Sorted(mapsKeys(kinds)), ev.Fault)
		}
	}
	return r
}

// prefixOf is the prefix queue puts before a stop's name, its dot included.
func prefixOf(queue func(string) string) string { return queue("") }

func (s *slipSeen) workOf(id string, effects map[string]int) map[string]int {
	out := map[string]int{}
	for _, st := range append(slices.Clone(slipStops), slipCompensations...) {
		if n := effects[id+" "+st]; n > 0 {
			out[st] = n
		}
	}
	return out
}

// slipFault is a slip's fault as the accounting reads it.
type slipFault struct {
	Stop         string `json:"stop"`
	Reason       string `json:"reason"`
	Compensation string `json:"compensation"`
}

// stopOr is the stop that failed, "" for no fault.
func (f *slipFault) stopOr() string {
	if f == nil {
		return ""
	}
	return f.Stop
}

func (f *slipFault) reasonOr() string {
	if f == nil {
		return ""
	}
	return f.Reason
}

// report prints the scenario's FAULT line and fails the test for a slip
// lost, half-compensated, ended where its script did not send it, work
// done twice, or anything unexplained.
func (r *slipResult) report(t *testing.T, name string) {
	t.Helper()
	line := fmt.Sprintf("FAULT %s: slips=%d completed=%d faulted=%d compensated=%d half=%d lost=%d duplicate_effects=%d duplicate_events=%d deadlettered=%d duplicate_deadletters=%d parked=%d queued=%d kills=%d",
		name, r.slips, r.completed, r.faulted, r.compensated, r.half, r.lost, r.duplicateEffects, r.duplicateEvents, r.deadlettered, r.extraDead, r.parked, r.queued, r.kills)
	fmt.Println(line)
	t.Log(line)
	if len(r.problems) > 0 {
		t.Logf("%s: %d findings: %s", name, len(r.problems), strings.Join(head(r.problems), "; "))
	}
	switch {
	case r.lost != 0, r.half != 0, r.unexpected != 0, r.queued != 0, r.parked != 0, r.duplicateEffects != 0:
		t.Errorf("%s: lost %d, half-compensated %d, not where the script sent them %d, not settled %d, parked %d, work done twice %d",
			name, r.lost, r.half, r.unexpected, r.queued, r.parked, r.duplicateEffects)
	case r.completed+r.faulted != r.slips || r.compensated != r.faulted:
		t.Errorf("%s: %d completed and %d faulted (%d of them compensated) of %d slips", name, r.completed, r.faulted, r.compensated, r.slips)
	}
	if r.kills == 0 {
		t.Errorf("%s: no consumer was killed", name)
	}
}
