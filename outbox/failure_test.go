package outbox_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport"
)

// fast is a backoff for tests that wait for a retry.
var fast = outbox.WithBackoff(50*time.Millisecond, 200*time.Millisecond)

func TestUnroutableStaysUntilItsQueueExists(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		missing := f.queue + ".missing"
		stop := run(t, newRelay(t, f.o, f.tr, fast, outbox.WithPollInterval(50*time.Millisecond)))
		id := write(t, f.pool, f.o, outbox.Message{Queue: missing, Body: []byte("wait for me")})[0]

		polltest.Eventually(t, "the unroutable message retried", func() bool {
			n, _, _ := f.attemptsOf(t, id)
			return n >= 2
		})
		n, last, ok := f.attemptsOf(t, id)
		if !ok || !strings.Contains(last, "reached no queue") {
			t.Fatalf("row %s: present %v, attempts %d, last error %q", id, ok, n, last)
		}
		if s, err := f.o.Stats(context.Background()); err != nil || s.Pending != 1 || s.Failing != 1 {
			t.Errorf("Stats = %+v, %v; want one pending, failing", s, err)
		}

		b.declareQueue(t, f.tr, missing)
		c := collect(t, f.tr, missing)
		got := c.wait(t, 1, 10*time.Second)
		f.waitEmpty(t, 5*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if header(got[0], acemq.HeaderID) != id || string(got[0].Body) != "wait for me" {
			t.Errorf("delivered %q with id %q, want id %s", got[0].Body, header(got[0], acemq.HeaderID), id)
		}
	})
}

func TestMissingExchangeStaysUntilItExists(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		exchange := f.queue + ".x"
		stop := run(t, newRelay(t, f.o, f.tr, fast, outbox.WithPollInterval(50*time.Millisecond)))
		id := write(t, f.pool, f.o, outbox.Message{Exchange: exchange, RoutingKey: "order.placed", Body: []byte("x")})[0]
		polltest.Eventually(t, "the message to a missing exchange retried", func() bool {
			n, _, _ := f.attemptsOf(t, id)
			return n >= 2
		})
		if _, last, _ := f.attemptsOf(t, id); !strings.Contains(last, "not found") {
			t.Errorf("last error %q, want it to say the exchange was not found", last)
		}
		if err := f.tr.Declare(context.Background(), transport.Topology{
			Exchanges: []transport.Exchange{{Name: exchange, Kind: "direct", Durable: true}},
			Bindings:  []transport.Binding{{Queue: f.queue, Exchange: exchange, Key: "order.placed"}},
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.deleteExchange(t, exchange) })
		c := collect(t, f.tr, f.queue)
		got := c.wait(t, 1, 10*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if header(got[0], acemq.HeaderExchange) != exchange || header(got[0], acemq.HeaderRoutingKey) != "order.placed" {
			t.Errorf("headers %v", got[0].Headers)
		}
	})
}

// killer is a transport that, after its nth confirmed publish, terminates
// every database session of the relay, as a crash between publish and
// delete would end them.
type killer struct {
	transport.Transport
	after int32
	n     atomic.Int32
	kill  func()
}

func (k *killer) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	c, err := k.Transport.Publish(ctx, p)
	if err == nil && k.n.Add(1) == k.after {
		k.kill()
	}
	return c, err
}

// terminate ends every session named app, from pool (named otherwise).
func terminate(t testing.TB, pool *pgxpool.Pool, app string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(),
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
		t.Errorf("terminate %s: %v", app, err)
	}
	return n
}

func TestRelayKilledBetweenPublishAndDeleteDuplicatesNeverLoses(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		c := collect(t, f.tr, f.queue)
		app := uniq("outbox_killed")
		relayPool := brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 4, AppName: app})
		o, err := outbox.New(relayPool, outbox.WithTable(f.o.Table()))
		if err != nil {
			t.Fatal(err)
		}
		const n = 100
		var msgs []outbox.Message
		for range n {
			msgs = append(msgs, outbox.Message{Queue: f.queue, Body: []byte("m")})
		}
		ids := write(t, f.pool, f.o, msgs...)
		killed := make(chan int, 1)
		k := &killer{Transport: f.tr, after: 10, kill: func() { killed <- terminate(t, f.pool, app) }}
		stop := run(t, newRelay(t, o, k, fast, outbox.WithBatchSize(40), outbox.WithConcurrency(4)))
		if sessions := <-killed; sessions == 0 {
			t.Fatal("no relay session to terminate")
		}
		f.waitEmpty(t, 20*time.Second)
		var got []transport.Delivery
		polltest.Eventually(t, "every message delivered", func() bool {
			got, _ = c.snapshot()
			return len(distinct(got)) == n
		})
		if err := stop(); err != nil {
			t.Fatalf("Run = %v; a lost connection must not stop it", err)
		}
		seen := distinct(got)
		for _, d := range got {
			if d.Headers[acemq.HeaderAttempt] != int64(1) {
				t.Errorf("a duplicate is attempt %v; it is the same message, attempt 1", d.Headers[acemq.HeaderAttempt])
			}
		}
		dups := 0
		for _, id := range ids {
			switch seen[id] {
			case 0:
				t.Errorf("message %s lost", id)
			case 1:
			default:
				dups += seen[id] - 1
			}
		}
		if len(seen) != n {
			t.Errorf("%d distinct ids delivered, want %d", len(seen), n)
		}
		t.Logf("%s: %d deliveries of %d messages: %d duplicates with the same id, none lost", b.name, len(got), n, dups)
		if dups < 10 {
			t.Errorf("%d duplicates; the 10 publishes before the kill were not recorded and must go out again", dups)
		}
	})
}

func TestRelaySurvivesLostConnections(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		c := collect(t, f.tr, f.queue)
		app := uniq("outbox_lost")
		o, err := outbox.New(brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 4, AppName: app}), outbox.WithTable(f.o.Table()))
		if err != nil {
			t.Fatal(err)
		}
		stop := run(t, newRelay(t, o, f.tr, fast, outbox.WithPollInterval(100*time.Millisecond)))
		want := map[string]bool{}
		for round := range 4 {
			for _, id := range write(t, f.pool, f.o, outbox.Message{Queue: f.queue, Body: []byte("a")}, outbox.Message{Queue: f.queue, Body: []byte("b")}) {
				want[id] = true
			}
			c.wait(t, 2*(round+1), 20*time.Second)
			terminate(t, f.pool, app) // the listener's session, and any other
			time.Sleep(50 * time.Millisecond)
		}
		f.waitEmpty(t, 10*time.Second)
		if err := stop(); err != nil {
			t.Fatalf("Run = %v; a lost connection must not stop it", err)
		}
		got, _ := c.snapshot()
		for _, d := range got {
			delete(want, header(d, acemq.HeaderID))
		}
		if len(want) != 0 {
			t.Errorf("%d messages not delivered", len(want))
		}
	})
}

// distinct counts deliveries by x-acemq-id.
func distinct(ds []transport.Delivery) map[string]int {
	seen := map[string]int{}
	for _, d := range ds {
		seen[header(d, acemq.HeaderID)]++
	}
	return seen
}

// slow is a transport whose publishes take a while and that reports the
// first one started.
type slow struct {
	transport.Transport
	delay   time.Duration
	started chan struct{}
	once    sync.Once
}

func (s *slow) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	s.once.Do(func() { close(s.started) })
	time.Sleep(s.delay)
	return s.Transport.Publish(ctx, p)
}

func TestStopFinishesTheBatchInHand(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		c := collect(t, f.tr, f.queue)
		const n = 40
		var msgs []outbox.Message
		for range n {
			msgs = append(msgs, outbox.Message{Queue: f.queue, Body: []byte("s")})
		}
		write(t, f.pool, f.o, msgs...)
		s := &slow{Transport: f.tr, delay: 100 * time.Millisecond, started: make(chan struct{})}
		stop := run(t, newRelay(t, f.o, s, outbox.WithConcurrency(4)))
		<-s.started
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		left := f.rows(t)
		if left == 0 || left == n {
			t.Fatalf("after the stop %d rows left, of %d; want the started ones deleted, the rest left", left, n)
		}
		// The deleted rows were confirmed by the broker; their deliveries
		// reach the collector when the machine gets to them. Any extra one
		// shows up in the count at the end.
		c.wait(t, n-int(left), 10*time.Second)
		var failed int
		if err := f.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+f.o.Table()+" WHERE attempts > 0").Scan(&failed); err != nil || failed != 0 {
			t.Errorf("%d rows count a failed attempt (%v); a stop is not a failure", failed, err)
		}
		stop = run(t, newRelay(t, f.o, f.tr))
		c.wait(t, n, 10*time.Second)
		f.waitEmpty(t, 5*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got, _ := c.snapshot(); len(got) != n {
			t.Errorf("%d deliveries, want %d: no duplicates after a clean stop", len(got), n)
		}
	})
}
