package faults_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
)

// TestFaultIdempotentConsumerKilled is scenario 10 under the
// redeliveries of scenario 3: the idempotent consumer runs in a child
// process and is killed with SIGKILL twice while it works. The work must
// still happen for every id, and once. Under SIGKILL only a claim committed
// with the work gives that (idempotency.Postgres.ClaimTx): a separate
// claim can die between the work and its confirm (the work runs twice) or
// between the claim and the work (the redelivery waits out the lease). The
// middleware's answer to the second case, retry rather than accept, is
// tested in idempotency_e2e_test.go.
func TestFaultIdempotentConsumerKilled(t *testing.T) {
	t.Parallel()
	const name = "idempotent-consumer-kill9"
	sc := startIdempotentScenario(t, name, 300)
	url, q, pol, eff, storeTable, stats, published := sc.url, sc.queue, sc.policy, sc.eff, sc.storeTable, sc.stats, sc.published
	env := sc.env
	for i, at := range []int{60, 150} {
		child := startConsumer(t, "idempotent-tx", url, q, env...)
		polltest.Within(t, 30*time.Second, fmt.Sprintf("consumer %d did the work %d times", i+1, at), func() bool {
			return len(eff.counts(t)) >= at
		})
		child.kill(t, syscall.SIGKILL)
	}
	last := startConsumer(t, "idempotent-tx", url, q, env...)
	sent := <-published
	t.Logf("%s: producer: %s", name, stats)
	sk := newSink(url, q)
	if !polltest.Until(30*time.Second, func() bool { return sk.settled(&ledger{accepted: eff.counts(t)}, sent)() }) {
		t.Errorf("%s: not settled within 30s", name)
	}
	last.kill(t, syscall.SIGTERM)
	r := sk.collect(t, name, sent, eff.counts(t), pol).report(t)
	onlyOnce(t, eff)
	dumpStore(t, eff, storeTable, r.lostIDs)
}

// dumpStore logs the idempotency store's rows of ids.
func dumpStore(t *testing.T, e effects, store string, ids []string) {
	rows, err := e.pool.Query(context.Background(), "SELECT id, claimed_at, lease_until, confirmed_at FROM "+store+" WHERE id = ANY($1)", ids)
	if err != nil {
		t.Log(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		vals, _ := rows.Values()
		t.Logf("store row of a lost id (id, claimed_at, lease_until, confirmed_at): %v", vals)
	}
}

// idempotentScenario is what the scenarios with an idempotent consumer in
// a child process share: a vhost, a queue with its topology, tables for
// the work's effects and the store, and a producer publishing n jobs.
type idempotentScenario struct {
	url, queue, pgURL string
	policy            retry.Policy
	eff               effects
	storeTable        string
	stats             *publishStats
	published         chan []job // what the producer sent, once it is done
	env               []string   // for the child: the database and tables
}

func startIdempotentScenario(t *testing.T, name string, n int) *idempotentScenario {
	t.Helper()
	pgURL := brokertest.PostgresURL(t)
	pool := brokertest.OpenPool(t, pgURL, brokertest.PoolConfig{})
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	effectsTable, storeTable := newTables(t, pool)
	eff := effects{pool: pool, table: effectsTable}
	log := testLogger(t)
	q := "faults." + name
	pol := testPolicy()
	pubTr := dial(t, url, log)
	if err := pubTr.Declare(context.Background(), acemq.Topology(q, pol, nil)); err != nil {
		t.Fatal(err)
	}
	js := jobs(name, n)
	stats := &publishStats{}
	published := make(chan []job, 1)
	go func() { published <- publishAll(t, pubTr, q, js, 2, 20*time.Millisecond, stats) }()
	return &idempotentScenario{url: url, queue: q, pgURL: pgURL, policy: pol, eff: eff, storeTable: storeTable, stats: stats, published: published,
		env: []string{envPostgres + "=" + pgURL, envEffects + "=" + effectsTable, envStore + "=" + storeTable}}
}
