package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
				if untilConfirmed(deadline, stats, func(ctx context.Context) error {
					_, err := c.Start(ctx, slip.Itinerary{ID: id, Name: "fulfil-order", Stops: stops,
						Variables: map[string]any{"order": orders[id].N},
						Completed: slip.ToQueue(events), Faulted: slip.ToQueue(events)},
						acemq.Outgoing{Body: b, ContentType: "application/json"})
					return err
				}) == nil {
					mu.Lock()
					confirmed++
					mu.Unlock()
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
