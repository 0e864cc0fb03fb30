package acemq_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

// TestIdempotentEndToEnd runs the Idempotent middleware inside a Server on
// the memory transport, on a memory store and on a PostgreSQL one:
// whatever brings a message back, its work is done once, and a failure is
// not mistaken for a duplicate.
func TestIdempotentEndToEnd(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			newStore := func(_ *testing.T, opts ...idempotency.Option) idempotency.Store {
				memOpts := make([]idempotency.MemoryOption, len(opts))
				for i, o := range opts {
					memOpts[i] = o
				}
				return idempotency.NewMemory(time.Hour, memOpts...)
			}
			if backend == "postgres" {
				newStore = idemPostgresStores(t)
			}

			// One at a time, the second copy finds the first done.
			t.Run("the same id published twice", func(t *testing.T) {
				t.Parallel()
				mw, duplicates, _ := idemMiddleware(t, newStore(t))
				work := always(ack.Accept())
				f := start(t, &acemq.Server{Concurrency: 1}, map[string]acemq.Handler{"orders": mw(work)})
				idemPublish(f, "orders", "order-1")
				idemPublish(f, "orders", "order-1")
				idemPublish(f, "orders", "order-2")
				f.eventually("three deliveries settled, one as a duplicate", func() bool {
					return duplicates() == 1 && work.count() == 2 && idemSettled(f, "orders")
				})
				if got := idemIDs(work); got != "order-1 order-2" {
					t.Errorf("the work ran for %s, want order-1 order-2", got)
				}
				f.counterReaches(acemq.MetricHandled, map[string]string{"queue": "orders", "outcome": "accept"}, 3)
			})

			// The work is done and confirmed, but the delivery goes back to the
			// broker (an ack lost with its connection, here an outer Requeue):
			// the redelivery is a duplicate.
			t.Run("a redelivery after the work was done", func(t *testing.T) {
				t.Parallel()
				mw, duplicates, _ := idemMiddleware(t, newStore(t))
				work := always(ack.Accept())
				handled := mw(work)
				lostAck := &recorder{answer: func(m *acemq.Message) ack.Ack {
					a := handled.ServeMessage(context.Background(), m)
					if !m.Envelope().Redelivered {
						return ack.Requeue()
					}
					return a
				}}
				f := start(t, &acemq.Server{}, map[string]acemq.Handler{"orders": lostAck})
				idemPublish(f, "orders", "order-1")
				f.eventually("delivered twice and settled", func() bool {
					return lostAck.count() == 2 && idemSettled(f, "orders")
				})
				if !lostAck.envelopes()[1].Redelivered {
					t.Error("the second delivery is not a redelivery")
				}
				if n := work.count(); n != 1 {
					t.Errorf("the work ran %d times for a delivery and its redelivery, want 1", n)
				}
				if n := duplicates(); n != 1 {
					t.Errorf("%s = %d, want 1", middleware.MetricDuplicates, n)
				}
			})

			// A handler that requeues has not done the work: the claim is
			// released and the redelivery does it.
			t.Run("a requeue before the work", func(t *testing.T) {
				t.Parallel()
				mw, duplicates, _ := idemMiddleware(t, newStore(t))
				var done atomic.Int32
				work := &recorder{answer: func(m *acemq.Message) ack.Ack {
					if !m.Envelope().Redelivered {
						return ack.Requeue() // not ready yet
					}
					done.Add(1)
					return ack.Accept()
				}}
				f := start(t, &acemq.Server{}, map[string]acemq.Handler{"orders": mw(work)})
				idemPublish(f, "orders", "order-1")
				f.eventually("delivered twice and settled", func() bool { return work.count() == 2 && idemSettled(f, "orders") })
				if done.Load() != 1 || duplicates() != 0 {
					t.Errorf("work done %d times, %d duplicates; want 1 and 0", done.Load(), duplicates())
				}
			})

			// Two failures, each released, then the third attempt succeeds; a
			// replay of the message after that is a duplicate.
			t.Run("a failure, then the retry", func(t *testing.T) {
				t.Parallel()
				mw, duplicates, inProgress := idemMiddleware(t, newStore(t))
				var done atomic.Int32
				work := &recorder{answer: func(m *acemq.Message) ack.Ack {
					if m.Attempt() < 3 {
						return ack.Retry(errBoom)
					}
					done.Add(1)
					return ack.Accept()
				}}
				f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Second)}, map[string]acemq.Handler{"orders": mw(work)})
				idemPublish(f, "orders", "order-1")
				f.eventually("attempt 1", func() bool { return work.count() == 1 })
				f.advance(1, time.Second)
				f.eventually("attempt 2", func() bool { return work.count() == 2 })
				f.advance(1, time.Second)
				f.eventually("attempt 3, accepted", func() bool { return work.count() == 3 && idemSettled(f, "orders") })
				if n, p := duplicates(), inProgress(); n != 0 || p != 0 {
					t.Fatalf("%s = %d, %s = %d: a retry was taken for another's", middleware.MetricDuplicates, n, middleware.MetricInProgress, p)
				}
				idemPublish(f, "orders", "order-1") // a replay
				f.eventually("the replay settled as a duplicate", func() bool { return duplicates() == 1 && idemSettled(f, "orders") })
				if work.count() != 3 || done.Load() != 1 {
					t.Errorf("handler ran %d times and did the work %d times, want 3 and 1", work.count(), done.Load())
				}
				for i, env := range work.envelopes() {
					if env.Attempt != i+1 || env.ID != "order-1" {
						t.Errorf("attempt %d: %+v", i+1, env)
					}
				}
				if f.broker.Depth("orders.dlq") != 0 {
					t.Error("a message that succeeded was dead-lettered")
				}
				f.counterReaches(acemq.MetricRetries, map[string]string{"where": "process"}, 2)
			})

			// Two copies at once: the second finds the first in progress and
			// is snoozed until the first's lease can have ended, not
			// accepted; when it comes back, after the first was confirmed,
			// it is a duplicate.
			t.Run("the same id delivered twice at once", func(t *testing.T) {
				t.Parallel()
				broker := memory.New()
				mw, duplicates, inProgress := idemMiddleware(t, newStore(t, idempotency.WithLease(10*time.Second), idempotency.WithClock(broker.Clock())))
				release := make(chan struct{})
				work := &recorder{answer: func(*acemq.Message) ack.Ack {
					<-release
					return ack.Accept()
				}}
				f := startOn(t, broker, &acemq.Server{Retry: retry.Fixed(3, time.Second)}, map[string]acemq.Handler{"orders": mw(work)})
				var once sync.Once
				free := func() { once.Do(func() { close(release) }) }
				t.Cleanup(free) // before the server's Shutdown, should the test fail first
				idemPublish(f, "orders", "order-1")
				idemPublish(f, "orders", "order-1")
				f.eventually("one copy in the handler, the other in progress", func() bool {
					return work.count() == 1 && inProgress() == 1
				})
				free()
				f.eventually("the first copy confirmed and acked", func() bool {
					return f.counter(acemq.MetricHandled, map[string]string{"queue": "orders", "outcome": "accept"}) == 1
				})
				f.advance(1, 11*time.Second) // the lease left, and a second
				f.eventually("the snoozed copy settled as a duplicate", func() bool { return duplicates() == 1 && idemSettled(f, "orders") })
				if n := work.count(); n != 1 {
					t.Errorf("the work ran %d times for two copies, want 1", n)
				}
				if f.broker.Depth("orders.dlq") != 0 {
					t.Error("a copy was dead-lettered")
				}
			})

			// A consumer claims the message, then is killed before the work:
			// the broker hands the delivery back at once. The redelivery finds
			// the claim in progress and is snoozed until the lease can have
			// ended, not accepted, not given the claim and not retried: it
			// spends no attempt, so however short the ladder (or with none),
			// it comes back after the lease and does the work.
			for _, tt := range []struct {
				name   string
				policy retry.Policy
			}{
				{"a consumer killed after its claim, and a ladder within the lease", retry.Fixed(2, time.Second)},
				{"a consumer killed after its claim, and no retry policy", retry.Policy{}},
			} {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					broker := memory.New()
					// 20 s: the snooze (the lease and a second) is spent in
					// the process, on the broker's clock.
					store := newStore(t, idempotency.WithLease(20*time.Second), idempotency.WithClock(broker.Clock()))
					mw, duplicates, inProgress := idemMiddleware(t, store)
					work := always(ack.Accept())
					handled := mw(work)
					var dead atomic.Bool
					killed := &recorder{answer: func(m *acemq.Message) ack.Ack {
						if dead.Swap(true) {
							return handled.ServeMessage(context.Background(), m)
						}
						if r, err := store.Claim(context.Background(), m.ID()); r != idempotency.Claimed || err != nil {
							t.Errorf("the killed consumer's claim = %v, %v", r, err)
						}
						return ack.Requeue() // its delivery goes back, as with a dead channel
					}}
					f := startOn(t, broker, &acemq.Server{Retry: tt.policy}, map[string]acemq.Handler{"orders": killed})
					idemPublish(f, "orders", "order-1")
					f.eventually("the redelivery found the claim in progress", func() bool { return inProgress() == 1 })
					if env := killed.envelopes()[1]; !env.Redelivered || env.Attempt != 1 {
						t.Errorf("the second delivery %+v is not the broker's redelivery", env)
					}
					f.advance(1, 21*time.Second)
					f.eventually("handled after the lease", func() bool { return work.count() == 1 && idemSettled(f, "orders") })
					if env := killed.envelopes()[2]; env.Attempt != 1 || env.Snoozes != 1 {
						t.Errorf("the delivery after the lease: attempt %d, snoozes %d; want attempt 1 (none spent), 1 snooze", env.Attempt, env.Snoozes)
					}
					if p, d := inProgress(), duplicates(); p != 1 || d != 0 {
						t.Errorf("%d deliveries in progress, %d duplicates; want 1 and 0", p, d)
					}
					if n := f.broker.Depth("orders.dlq"); n != 0 {
						t.Errorf("%d dead-lettered, though the message's work never ran", n)
					}
					f.counterReaches(acemq.MetricHandled, map[string]string{"queue": "orders", "outcome": "accept"}, 1)
				})
			}
		})
	}
}

// A database that is down is a failed claim: the message is retried under
// the server's policy and then dead-lettered with the reason, never
// accepted, and the handler never runs. The reason shows no password.
func TestIdempotentDatabaseDownFollowsThePolicy(t *testing.T) {
	t.Parallel()
	pool := brokertest.RefusedPool(t)
	store, err := idempotency.NewPostgres(pool)
	if err != nil {
		t.Fatal(err)
	}
	mw, duplicates, _ := idemMiddleware(t, store)
	work := always(ack.Accept())
	f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Second)}, map[string]acemq.Handler{"orders": mw(work)})
	idemPublish(f, "orders", "order-1")
	f.advance(1, time.Second)
	f.advance(1, time.Second)
	d := f.only("orders.dlq")
	reason, _ := d.Headers[acemq.HeaderError].(string)
	const want = `exhausted 3 attempts: acemq: idempotency claim failed, the handler did not run: acemq: idempotency claim of "order-1": failed to connect`
	if !strings.HasPrefix(reason, want) {
		t.Errorf("reason\n got %q\nwant it to start %q", reason, want)
	}
	if strings.Contains(reason, "secret") {
		t.Errorf("the reason %q shows the password", reason)
	}
	f.eventually("the original acked", func() bool { return idemSettled(f, "orders") })
	if work.count() != 0 || duplicates() != 0 {
		t.Errorf("handler ran %d times, %d duplicates; want neither", work.count(), duplicates())
	}
	if got := f.counter(acemq.MetricHandled, map[string]string{"queue": "orders", "outcome": "accept"}); got != 0 {
		t.Errorf("handled{accept} = %d: a message was accepted with its store down", got)
	}
}

// idemMiddleware is Idempotent on store, counting on a meter provider of
// its own, and functions that read its counts of duplicates and of
// deliveries found in progress.
func idemMiddleware(t *testing.T, store idempotency.Store) (mw acemq.Middleware, duplicates, inProgress func() int64) {
	t.Helper()
	mp, reader := metrictest.New(t)
	count := func(name string) int64 {
		return metrictest.SumEvery(t, reader, name, map[string]string{"queue": "orders"})
	}
	return middleware.Idempotent(store, middleware.WithMeterProvider(mp)),
		func() int64 { return count(middleware.MetricDuplicates) },
		func() int64 { return count(middleware.MetricInProgress) }
}

// idemPublish publishes a message with the given id, as a service
// republishing one business event would.
func idemPublish(f *fixture, queue, id string) {
	f.t.Helper()
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: queue, ID: id, Body: []byte(`{}`)}); err != nil {
		f.t.Fatalf("publish %s to %s: %v", id, queue, err)
	}
}

// idemSettled reports whether queue holds no message, delivered or not.
func idemSettled(f *fixture, queue string) bool {
	return f.broker.Depth(queue) == 0 && f.broker.Unacked(queue) == 0
}

// idemIDs lists the ids a recorder saw, sorted: handlers run concurrently.
func idemIDs(r *recorder) string {
	var ids []string
	for _, env := range r.envelopes() {
		ids = append(ids, env.ID)
	}
	slices.Sort(ids)
	return strings.Join(ids, " ")
}

// idemPostgresStores connects to ACEMQ_POSTGRES_URL and returns a maker of
// stores, each on a table of its own that is dropped when its test ends.
// Without the variable the test skips, except under CI, where that is a
// failure.
func idemPostgresStores(t *testing.T) func(*testing.T, ...idempotency.Option) idempotency.Store {
	t.Helper()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
	return func(t *testing.T, opts ...idempotency.Option) idempotency.Store {
		t.Helper()
		table := fmt.Sprintf("idem_e2e_%016x", rand.Uint64())
		pgOpts := []idempotency.PostgresOption{idempotency.WithTable(table)}
		for _, o := range opts {
			pgOpts = append(pgOpts, o)
		}
		store, err := idempotency.NewPostgres(pool, pgOpts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(context.Background(), store.CreateTableSQL()); err != nil {
			t.Fatalf("create %s: %v", table, err)
		}
		t.Cleanup(func() {
			if _, err := pool.Exec(context.Background(), "DROP TABLE "+table); err != nil {
				t.Errorf("drop %s: %v", table, err)
			}
		})
		return store
	}
}
