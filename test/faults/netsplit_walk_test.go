package faults_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/outbox"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// TestFaultNetsplitWalk is TestFaultNetsplitLeaderCut (node 1, leading
// the quorum work queue and every delay level, cut off both ways for 20 s
// under load, then healed) with every other message published with a
// Delay of 2 to 30 s, so that at the cut hundreds of delayed messages are
// walking down the levels (acemq.delay.v1.*) whose leader is cut off, and
// with more traffic written into a transactional outbox in PostgreSQL
// throughout while a relay, connected to node 1 with the other two as
// fallbacks, publishes it. Each id is accounted for (the FAULT line): the
// delayed, the direct and the outbox's alike, lost=0, duplicates counted;
// the outbox ends with nothing pending.
func TestFaultNetsplitWalk(t *testing.T) {
	t.Parallel()
	sc := netsplitScenario{name: "netsplit-walk", pol: clusterWaitsPolicy().WithDelayQueues(true),
		delayOf: walkDelay, feed: outboxFeed(netsplitOutboxRows)}
	sc.run(t)
}

// walkDelay is job i's delay: none for even i, 2 s to 30 s for odd i, in
// steps of a millisecond, so that every level from 125 ms (level 0) to
// 16 s (level 7) holds some and most messages wait on several in turn.
func walkDelay(i int) time.Duration {
	if i%2 == 0 {
		return 0
	}
	return 2*time.Second + time.Duration((i*7919)%28000)*time.Millisecond
}

// netsplitOutboxRows is how many rows the outbox feed writes, three to a
// transaction, paced to span the cut.
const netsplitOutboxRows = 300

// outboxFeed is a netsplitFeed writing n jobs (netsplitJobs' scripts, ids
// "<scenario>-outbox-NNNN") into an outbox table of the run's PostgreSQL
// database, three to a transaction every 360 ms (about 36 s), while a
// relay connected to the victim, with the other nodes as fallbacks,
// publishes them.
func outboxFeed(n int) func(t testing.TB, s *brokertest.Netsplit, q string, log *zap.Logger) netsplitFeed {
	return func(t testing.TB, s *brokertest.Netsplit, q string, log *zap.Logger) netsplitFeed {
		t.Helper()
		pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
		table := fmt.Sprintf("faults_nswalk_%d", time.Now().UnixNano()%1e9)
		ob, err := outbox.New(pool, outbox.WithTable(table))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := pool.Exec(ctx, ob.CreateTableSQL()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+"; DROP FUNCTION IF EXISTS "+table+"_notify()")
		})
		nodes := s.Nodes
		var fallbacks []string
		for k := range nodes {
			if k != netsplitVictim {
				fallbacks = append(fallbacks, nodes[k].URL)
			}
		}
		tr := dial(t, nodes[netsplitVictim].URL, log, rabbitmq.WithURLs(fallbacks...),
			rabbitmq.WithConnectionName(fmt.Sprintf("netsplit outbox relay on node %d", netsplitVictim)))
		relay, err := outbox.NewRelay(ob, tr, outbox.WithBatchSize(20), outbox.WithConcurrency(4),
			outbox.WithPollInterval(200*time.Millisecond), outbox.WithBackoff(100*time.Millisecond, 2*time.Second), outbox.WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		rctx, stopRelay := context.WithCancel(ctx)
		f := &outboxRun{ob: ob, stopRelay: stopRelay, relayDone: make(chan error, 1), written: make(chan struct{}), quit: make(chan struct{})}
		go func() { f.relayDone <- relay.Run(rctx) }()
		t.Cleanup(func() { f.end() })
		js := netsplitJobs(strings.TrimPrefix(q, "faults.")+"-outbox", n)
		go func() {
			defer close(f.written)
			for i := 0; i < len(js); i += 3 {
				batch := js[i:min(i+3, len(js))]
				for {
					select {
					case <-f.quit:
						return
					default:
					}
					err := writeJobs(ctx, pool, ob, q, batch)
					if err == nil {
						break
					}
					// The database is not what this scenario cuts: a failed
					// commit is said, and written again (a duplicate at
					// worst, if its answer was what failed).
					f.mu.Lock()
					f.writeFailures++
					f.mu.Unlock()
					time.Sleep(100 * time.Millisecond)
				}
				f.mu.Lock()
				f.committed = append(f.committed, batch...)
				f.mu.Unlock()
				time.Sleep(360 * time.Millisecond)
			}
		}()
		return f
	}
}

// outboxRun is an outbox feed running.
type outboxRun struct {
	ob        *outbox.Outbox
	stopRelay func()
	relayDone chan error
	written   chan struct{} // closed when the writer has ended
	quit      chan struct{} // closed to end the writer early
	endOnce   sync.Once
	relayErr  error

	mu            sync.Mutex
	committed     []job
	writeFailures int
}

func (f *outboxRun) sent(t testing.TB) []job {
	t.Helper()
	<-f.written
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Logf("outbox: %d rows committed (%d transactions failed and were written again)", len(f.committed), f.writeFailures)
	return f.committed
}

func (f *outboxRun) stop(t testing.TB) {
	t.Helper()
	var st outbox.Stats
	if !polltest.Until(30*time.Second, func() bool {
		var err error
		st, err = f.ob.Stats(context.Background())
		return err == nil && st.Pending == 0
	}) {
		t.Errorf("outbox: %d rows still pending (%d of them failing, the oldest %s old) once the scenario settled", st.Pending, st.Failing, st.OldestAge)
	}
	if err := f.end(); err != nil {
		t.Errorf("outbox relay: %v", err)
	}
}

// end stops the writer and the relay and returns Run's error.
func (f *outboxRun) end() error {
	f.endOnce.Do(func() {
		close(f.quit)
		<-f.written
		f.stopRelay()
		f.relayErr = <-f.relayDone
	})
	return f.relayErr
}
