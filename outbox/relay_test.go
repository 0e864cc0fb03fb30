package outbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport"
)

// fixture is one relay test's database table, transport and queue.
type fixture struct {
	b     broker
	pool  *pgxpool.Pool
	o     *outbox.Outbox
	tr    transport.Transport
	queue string
}

func setup(t *testing.T, b broker, opts ...outbox.Option) *fixture {
	t.Helper()
	f := &fixture{b: b, pool: brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 8}), tr: b.connect(t), queue: strings.ReplaceAll(uniq("outbox.test"), "_", ".")}
	f.o = newOutbox(t, f.pool, opts...)
	b.declareQueue(t, f.tr, f.queue)
	return f
}

// forEachBroker runs test as a parallel subtest on every broker.
func forEachBroker(t *testing.T, test func(t *testing.T, b broker)) {
	t.Parallel()
	for _, b := range brokers(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b)
		})
	}
}

// rows counts the rows left in the outbox.
func (f *fixture) rows(t testing.TB) int64 {
	t.Helper()
	s, err := f.o.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.Pending
}

// waitEmpty waits until the relay deleted every row.
func (f *fixture) waitEmpty(t testing.TB, d time.Duration) {
	t.Helper()
	var left int64
	if !polltest.Until(d, func() bool { left = f.rows(t); return left == 0 }) {
		t.Fatalf("%d rows still in the outbox after %s", left, d)
	}
}

func TestRelayDeliversWhatCommitted(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		c := collect(t, f.tr, f.queue)
		ctx := context.Background()

		// A rolled-back transaction owes nothing.
		tx, err := f.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.o.Write(ctx, tx, outbox.Message{Queue: f.queue, Body: []byte("rolled back")}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}

		stop := run(t, newRelay(t, f.o, f.tr))
		ids := write(t, f.pool, f.o, outbox.Message{
			Queue: f.queue, Body: []byte(`{"n":1}`), ContentType: "application/json", CorrelationID: "corr-1",
			Headers: map[string]any{"tenant": "acme", "n": 42, "ratio": 0.5, "ok": true, "tags": []any{"a", "b"},
				"nested": map[string]any{"k": "v"}},
		}, outbox.Message{Queue: f.queue, Body: []byte("second"), ID: "my-own-id"})
		got := c.wait(t, 2, 10*time.Second)
		if err := stop(); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if ids[1] != "my-own-id" {
			t.Errorf("Write returned id %q, want the given my-own-id", ids[1])
		}
		if len(got) != 2 {
			t.Fatalf("%d deliveries, want 2 (the rolled-back one must not appear)", len(got))
		}
		// Two messages of one batch may arrive in either order.
		if header(got[0], acemq.HeaderID) != ids[0] {
			got[0], got[1] = got[1], got[0]
		}
		d := got[0]
		if string(d.Body) != `{"n":1}` || d.ContentType != "application/json" || d.CorrelationID != "corr-1" || d.DeliveryMode != 2 {
			t.Errorf("first delivery = %q %+v", d.Body, d.Properties)
		}
		if header(d, acemq.HeaderID) != ids[0] || d.MessageID != ids[0] {
			t.Errorf("x-acemq-id %q, message-id %q; want %q", header(d, acemq.HeaderID), d.MessageID, ids[0])
		}
		if header(d, acemq.HeaderExchange) != "" || header(d, acemq.HeaderRoutingKey) != f.queue {
			t.Errorf("exchange/key headers %q/%q", header(d, acemq.HeaderExchange), header(d, acemq.HeaderRoutingKey))
		}
		if d.Headers[acemq.HeaderAttempt] != int64(1) {
			t.Errorf("attempt header %#v, want 1", d.Headers[acemq.HeaderAttempt])
		}
		ms, _ := d.Headers[acemq.HeaderCreated].(int64)
		if age := time.Since(time.UnixMilli(ms)); age < 0 || age > time.Minute {
			t.Errorf("created header %v is %s ago", d.Headers[acemq.HeaderCreated], age)
		}
		if header(d, "tenant") != "acme" || d.Headers["ok"] != true || d.Headers["ratio"] != 0.5 {
			t.Errorf("user headers %v", d.Headers)
		}
		if d.Headers["n"] != int64(42) {
			t.Errorf("header n = %#v, want 42", d.Headers["n"])
		}
		if nested, _ := d.Headers["nested"].(map[string]any); nested["k"] != "v" {
			t.Errorf("nested header %#v", d.Headers["nested"])
		}
		if header(got[1], acemq.HeaderID) != "my-own-id" || string(got[1].Body) != "second" {
			t.Errorf("second delivery %q with id %q", got[1].Body, header(got[1], acemq.HeaderID))
		}
		if n := f.rows(t); n != 0 {
			t.Errorf("%d rows left, want 0", n)
		}
	})
}

// TestRelayLatency reports commit-to-delivery latency with LISTEN/NOTIFY:
// each message committed on its own, a little apart, so what is measured
// is the wake-up path rather than a backlog. No timed assertion: the
// figures are for the log.
func TestRelayLatency(t *testing.T) {
	const n = 200
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		c := collect(t, f.tr, f.queue)
		// A poll interval far above the latency: what is measured is the
		// notification.
		stop := run(t, newRelay(t, f.o, f.tr, outbox.WithPollInterval(time.Minute)))
		listening(t, f)
		committed := make(map[string]time.Time, n)
		ctx := context.Background()
		for i := range n {
			tx, err := f.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			id, err := f.o.Write(ctx, tx, outbox.Message{Queue: f.queue, Body: []byte(fmt.Sprint(i))})
			if err != nil {
				t.Fatal(err)
			}
			committed[id] = time.Now()
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
		}
		c.wait(t, n, 30*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		got, at := c.snapshot()
		lat := make([]time.Duration, 0, n)
		for i, d := range got {
			lat = append(lat, at[i].Sub(committed[header(d, acemq.HeaderID)]))
		}
		p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
		t.Logf("%s: commit→delivery over %d messages: p50 %s, p99 %s, max %s", b.name, n, p50, p99, percentile(lat, 1))
	})
}

// listening waits until the relay's connection has LISTENed on f's
// outbox, as pg_stat_activity shows it: a message committed before would
// wake nobody, and wait out the poll interval.
func listening(t *testing.T, f *fixture) {
	t.Helper()
	want := "LISTEN " + pgx.Identifier{f.o.Table()}.Sanitize()
	var err error
	if !polltest.Until(60*time.Second, func() bool {
		var n int
		err = f.pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE query = $1", want).Scan(&n)
		return err == nil && n > 0
	}) {
		t.Fatalf("the relay did not %s within 60s (%v)", want, err)
	}
}

func TestRelayOrderWithConcurrencyOne(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		c := collect(t, f.tr, f.queue)
		const n = 120
		var msgs []outbox.Message
		for i := range n {
			msgs = append(msgs, outbox.Message{Queue: f.queue, Body: []byte(fmt.Sprint(i))})
		}
		// Several transactions, written before the relay starts, so that
		// batches (of 50) hold rows of several of them.
		write(t, f.pool, f.o, msgs[:40]...)
		write(t, f.pool, f.o, msgs[40:90]...)
		write(t, f.pool, f.o, msgs[90:]...)
		stop := run(t, newRelay(t, f.o, f.tr, outbox.WithConcurrency(1), outbox.WithBatchSize(50)))
		got := c.wait(t, n, 20*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for i, d := range got {
			if string(d.Body) != fmt.Sprint(i) {
				t.Fatalf("delivery %d is message %s: not in write order", i, d.Body)
			}
		}
	})
}

func TestTwoRelaysDeliverEachMessageOnce(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		c := collect(t, f.tr, f.queue)
		const n = 600
		stop1 := run(t, newRelay(t, f.o, f.tr, outbox.WithBatchSize(20), outbox.WithConcurrency(8)))
		stop2 := run(t, newRelay(t, f.o, b.connect(t), outbox.WithBatchSize(20), outbox.WithConcurrency(8)))
		want := map[string]bool{}
		for i := 0; i < n; i += 50 {
			var msgs []outbox.Message
			for j := i; j < i+50; j++ {
				msgs = append(msgs, outbox.Message{Queue: f.queue, Body: []byte(fmt.Sprint(j))})
			}
			for _, id := range write(t, f.pool, f.o, msgs...) {
				want[id] = true
			}
		}
		c.wait(t, n, 30*time.Second)
		f.waitEmpty(t, 10*time.Second)
		time.Sleep(200 * time.Millisecond) // room for a duplicate to show
		if err := stop1(); err != nil {
			t.Fatal(err)
		}
		if err := stop2(); err != nil {
			t.Fatal(err)
		}
		got, _ := c.snapshot()
		seen := map[string]int{}
		for _, d := range got {
			seen[header(d, acemq.HeaderID)]++
		}
		for id := range want {
			if seen[id] != 1 {
				t.Errorf("message %s delivered %d times, want once", id, seen[id])
			}
		}
		if len(got) != n {
			t.Errorf("%d deliveries, want %d", len(got), n)
		}
	})
}

// attemptsOf reads the attempts and last error of the row with id.
func (f *fixture) attemptsOf(t testing.TB, id string) (int, string, bool) {
	t.Helper()
	var n int
	var last *string
	err := f.pool.QueryRow(context.Background(),
		"SELECT attempts, last_error FROM "+f.o.Table()+" WHERE id = $1", id).Scan(&n, &last)
	if err == pgx.ErrNoRows {
		return 0, "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	if last == nil {
		return n, "", true
	}
	return n, *last, true
}

// TestRelayAwakeLosesNoWake: writers commit in bursts, some holding their
// transaction open after the write, while the relay goes to sleep and
// wakes between the bursts; with a poll interval of an hour, every row
// must be published by a notification or by the relay's last claim
// before it slept (awake.go), never left to the poll.
func TestRelayAwakeLosesNoWake(t *testing.T) {
	const writers, bursts, perBurst = 8, 20, 24
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		c := collect(t, f.tr, f.queue)
		stop := run(t, newRelay(t, f.o, f.tr, outbox.WithPollInterval(time.Hour)))
		listening(t, f)
		ctx := context.Background()
		for burst := range bursts {
			errs := make(chan error, perBurst)
			jobs := make(chan int, perBurst)
			for i := range perBurst {
				jobs <- i
			}
			close(jobs)
			for range writers {
				go func() {
					for i := range jobs {
						errs <- pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
							_, err := f.o.Write(ctx, tx, outbox.Message{Queue: f.queue, Body: []byte(fmt.Sprint(burst*perBurst + i))})
							if err == nil && i%3 == 0 {
								time.Sleep(time.Duration(i%7) * time.Millisecond) // a transaction that goes on after its write
							}
							return err
						})
					}
				}()
			}
			for range perBurst {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			c.wait(t, (burst+1)*perBurst, 60*time.Second) // the relay caught up, and may sleep before the next burst
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		f.waitEmpty(t, 30*time.Second)
	})
}
