package faults_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/outbox"
)

// pg is the private PostgreSQL server of the scenario that crashes it.
var pg brokertest.LazyPostgres

const envOutbox = "ACEMQ_FAULTS_OUTBOX" // the outbox table, for mode "relay"

// TestFaultOutboxRelay is scenario 9: services write messages into an
// outbox on a private PostgreSQL server while a relay, in a child process,
// publishes them. The relay is killed with SIGKILL in the middle of its
// batches, a second one takes over, and PostgreSQL is crashed (stopped
// -m immediate) and started again under it. Every message whose
// transaction committed is delivered at least once.
func TestFaultOutboxRelay(t *testing.T) {
	t.Parallel()
	const name = "outbox-relay"
	db := pg.Get(t)
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log := testLogger(t)
	q := "faults." + name
	table := fmt.Sprintf("faults_outbox_%d", time.Now().UnixNano()%1e9)
	pool := brokertest.OpenPool(t, db.URL, brokertest.PoolConfig{})
	ob, err := outbox.New(pool, outbox.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, ob.CreateTableSQL()); err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	tr := dial(t, url, log)
	run := serve(t, tr, q, &acemq.Server{}, l.handler(0), log)

	js := jobs(name, 400)
	for i := range js {
		js[i] = job{ID: js[i].ID} // every one accepted: the subject is the relay
	}
	// Most rows are written before the first relay starts, so that it has
	// batches back to back when it is killed; the rest are written while
	// the second relay runs and the database is crashed.
	var mu sync.Mutex
	var committed []job
	var writeFailures []string
	write := func(part []job, pace time.Duration) {
		for i := 0; i < len(part); i += 10 {
			batch := part[i:min(i+10, len(part))]
			for {
				err := writeJobs(ctx, pool, ob, q, batch)
				// A commit whose answer was lost may have committed: the
				// batch is written again, a duplicate at worst.
				if err == nil {
					break
				}
				mu.Lock()
				writeFailures = append(writeFailures, err.Error())
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
			}
			mu.Lock()
			committed = append(committed, batch...)
			mu.Unlock()
			time.Sleep(pace)
		}
	}
	write(js[:300], 0)

	env := []string{envPostgres + "=" + db.URL, envOutbox + "=" + table}
	first := startConsumer(t, "relay", url, q, env...)
	polltest.Within(t, 30*time.Second, "the first relay published 100", func() bool { return len(l.acceptedCopy()) >= 100 })
	first.kill(t, syscall.SIGKILL)
	killedAt := len(l.acceptedCopy())

	second := startConsumer(t, "relay", url, q, env...)
	wrote := make(chan struct{})
	// Paced to take over 2 s, well past the crash below, which follows the
	// second relay's first hundred within a second: the crash must find
	// writers to fail.
	go func() { defer close(wrote); write(js[300:], 200*time.Millisecond) }()
	polltest.Within(t, 30*time.Second, "the second relay published", func() bool { return len(l.acceptedCopy()) >= killedAt+100 })
	db.Crash(t, time.Second)
	<-wrote

	mu.Lock()
	sent := committed
	if len(writeFailures) == 0 {
		t.Error("no write failed: the database crash missed the writers")
	} else {
		t.Logf("%s: %d transactions failed across the crash, first: %s", name, len(writeFailures), writeFailures[0])
	}
	mu.Unlock()
	if !polltest.Until(60*time.Second, func() bool { return l.allAccepted(sent) }) {
		t.Errorf("%s: not every committed message was delivered within 60s", name)
	}
	second.kill(t, syscall.SIGTERM)
	if st, err := ob.Stats(ctx); err != nil {
		t.Errorf("outbox stats: %v", err)
	} else if st.Pending != 0 {
		t.Errorf("%d rows still pending in the outbox", st.Pending)
	}
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	newSink(url, q).collect(t, name, sent, l.acceptedCopy(), testPolicy()).report(t)
}

// runRelay is the relay process: it relays the outbox table of the
// environment to the broker until SIGTERM (ctx) or SIGKILL.
func runRelay(t *testing.T, ctx context.Context) {
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.InfoLevel))
	pool := brokertest.OpenPool(t, os.Getenv(envPostgres), brokertest.PoolConfig{})
	ob, err := outbox.New(pool, outbox.WithTable(os.Getenv(envOutbox)))
	if err != nil {
		t.Fatal(err)
	}
	tr := dial(t, os.Getenv(envURL), log)
	relay, err := outbox.NewRelay(ob, tr, outbox.WithBatchSize(50), outbox.WithConcurrency(8),
		outbox.WithPollInterval(200*time.Millisecond), outbox.WithBackoff(100*time.Millisecond, time.Second), outbox.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := relay.Run(ctx); err != nil {
		t.Fatalf("relay: %v", err)
	}
}

// writeJobs writes batch into the outbox for queue q in one transaction,
// within 5 s.
func writeJobs(ctx context.Context, pool *pgxpool.Pool, ob *outbox.Outbox, q string, batch []job) error {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return pgx.BeginFunc(wctx, pool, func(tx pgx.Tx) error {
		for _, j := range batch {
			if _, err := ob.Write(wctx, tx, outbox.Message{Queue: q, ID: j.ID, Body: body(j), ContentType: "application/json"}); err != nil {
				return err
			}
		}
		return nil
	})
}
