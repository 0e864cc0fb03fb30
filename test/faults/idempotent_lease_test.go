package faults_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/middleware"
)

// envLease is the idempotency store's lease in the child of mode
// "idempotent-lease", as a time.Duration string.
const envLease = "ACEMQ_FAULTS_LEASE"

// leaseKillLease is the scenario's lease: far longer than its retry ladder
// (four attempts within a second), so that a redelivery that spent
// attempts on a claim in progress would be dead-lettered long before the
// claim of the consumer that was killed ran out, and long enough that the
// next consumer, started after the kill, meets those claims still held.
const leaseKillLease = 10 * time.Second

// snoozedLine is the start of the middleware's log line for a message put
// off because its id was claimed elsewhere.
const snoozedLine = "acemq: id in progress elsewhere; snoozed"

// TestFaultIdempotentClaimHeldByKilled is scenario 10 with the claim apart
// from the work (middleware.Idempotent on the PostgreSQL store): the
// consumer runs in a child process, eight handlers at a time each taking
// a while, and is killed with SIGKILL twice mid-handler. Each kill leaves
// claims unsettled; the broker hands their messages to the next consumer
// at once, which finds them in progress. They must wait out the dead
// claims' lease, spending no attempt: none may be dead-lettered as
// exhausted though its work never ran, though the ladder is far shorter
// than the lease. The work can run twice for a message killed between its
// work and its confirm (the gap ClaimTx closes, scenario
// idempotent-consumer-kill9); that shows as duplicates, not as a failure.
func TestFaultIdempotentClaimHeldByKilled(t *testing.T) {
	t.Parallel()
	const name = "idempotent-lease-kill9"
	sc := startIdempotentScenario(t, name, 200)
	url, q, pol, eff, storeTable, stats, published := sc.url, sc.queue, sc.policy, sc.eff, sc.storeTable, sc.stats, sc.published
	env := append(sc.env, envLease+"="+leaseKillLease.String())
	var after []*child // the consumers that came after a kill
	for i, at := range []int{40, 100} {
		c := startConsumer(t, "idempotent-lease", url, q, env...)
		if i > 0 {
			after = append(after, c)
		}
		polltest.Within(t, 60*time.Second, fmt.Sprintf("consumer %d did the work %d times", i+1, at), func() bool {
			return len(eff.counts(t)) >= at
		})
		c.kill(t, syscall.SIGKILL)
	}
	last := startConsumer(t, "idempotent-lease", url, q, env...)
	after = append(after, last)
	sent := <-published
	t.Logf("%s: producer: %s", name, stats)
	sk := newSink(url, q)
	// The slowest message waits out a lease (10 s) after the last kill,
	// and a second: a minute is room for a loaded machine.
	if !polltest.Until(90*time.Second, func() bool { return sk.settled(&ledger{accepted: eff.counts(t)}, sent)() }) {
		t.Errorf("%s: not settled within 90s", name)
	}
	last.kill(t, syscall.SIGTERM)
	// Every job expected to be accepted and found in .dlq instead (one
	// dead-lettered for its claim in progress) fails the report.
	r := sk.collect(t, name, sent, eff.counts(t), pol).report(t)
	dumpStore(t, eff, storeTable, r.lostIDs)
	snoozed := 0
	for _, c := range after {
		b, err := os.ReadFile(c.out)
		if err != nil {
			t.Fatal(err)
		}
		snoozed += strings.Count(string(b), snoozedLine)
	}
	t.Logf("%s: %d messages snoozed for a claim held by a killed consumer", name, snoozed)
	if snoozed == 0 {
		t.Errorf("%s: no message found a killed consumer's claim in progress: the scenario did not test what it is for", name)
	}
}

// runIdempotentLease is the consumer process of
// TestFaultIdempotentClaimHeldByKilled: the jobs' script behind
// middleware.Idempotent on the PostgreSQL store with the lease of
// envLease, eight handlers at once, each taking 100 ms before its work so
// that a kill finds claims unsettled.
func runIdempotentLease(t *testing.T, ctx context.Context) {
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.InfoLevel))
	pool := brokertest.OpenPool(t, os.Getenv(envPostgres), brokertest.PoolConfig{})
	lease, err := time.ParseDuration(os.Getenv(envLease))
	if err != nil {
		t.Fatalf("%s: %v", envLease, err)
	}
	store, err := idempotency.NewPostgres(pool, idempotency.WithTable(os.Getenv(envStore)), idempotency.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	eff := effects{pool: pool, table: os.Getenv(envEffects)}
	h := acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, j job) ack.Ack {
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ack.Retry(ctx.Err())
		}
		if a := script(m, j); a.Outcome() != ack.OutcomeAccept {
			return a
		}
		if err := eff.do(ctx, m.ID()); err != nil {
			return ack.Retry(err)
		}
		return ack.Accept()
	})
	tr := dial(t, os.Getenv(envURL), log)
	mux := acemq.NewMux()
	mux.Handle(os.Getenv(envQueue), middleware.Idempotent(store, middleware.WithLogger(log))(h))
	srv := &acemq.Server{Transport: tr, Handler: mux, Retry: testPolicy(), Concurrency: 8, Logger: log}
	if err := srv.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
