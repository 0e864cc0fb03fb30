package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The relay scenario (issue 28): the outbox relay against raw amqp091-go
// confirmed publishing in the same round. The raw system is the publish
// scenario's own (publishRaw: n confirmed, persistent, mandatory publishes
// from cfg.publishers goroutines, cfg.channels confirm channels, at most
// cfg.window awaiting a confirm). acemq's is the whole outbox path:
// cfg.relayWriters goroutines each commit one row per transaction (BEGIN,
// INSERT, COMMIT, as a service that owes one message per request does)
// while one outbox.Relay, with a concurrency of cfg.window on a transport
// of cfg.channels confirm channels, claims, publishes with confirms and
// deletes them. Its clock runs from the first insert to the last row
// deleted.
//
// Then, untimed and on the same relay and table, the latency part:
// cfg.relayLoad of the throughput just measured, offered open loop for
// cfg.relaySeconds (row i is handed to a writer at t0 + i/rate, whatever
// the relay is doing), and for each row the time from its transaction's
// commit (when Commit returned in the writer) to the broker's confirm of
// its publish (when the relay's Publish returned, seen through a wrapper
// of the relay's transport). The relay is woken by LISTEN/NOTIFY; its
// poll interval is the default (1 s), so a notification missed would show.

// relayPhase records one phase of a relay run: when each row's transaction
// committed and when its publish was confirmed, on the process's monotonic
// clock (ns after t0, +1 so that 0 means not yet).
type relayPhase struct {
	*phaseRec                // confirms: lat[i] is confirm − t0; got, dups, bad
	committed []atomic.Int64 // commit − t0
}

func newRelayPhase(id, n int, t0 time.Time) *relayPhase {
	p := &relayPhase{phaseRec: newPhase(id, n, 0), committed: make([]atomic.Int64, n)}
	p.t0 = t0
	return p
}

func (p *relayPhase) commit(i int, at time.Time) { p.committed[i].Store(int64(at.Sub(p.t0)) + 1) }

// latencies are confirm − commit for every row with both. A confirm may
// come before the writer's Commit returns (the row is visible, and the
// NOTIFY sent, once the commit is done in the server, before the reply
// reaches the writer): such a latency is negative and is kept as it is.
func (p *relayPhase) latencies() []time.Duration {
	out := make([]time.Duration, 0, len(p.lat))
	for i := range p.lat {
		c, f := p.committed[i].Load(), p.lat[i].Load()
		if c > 0 && f > 0 {
			out = append(out, time.Duration(f-c))
		}
	}
	return out
}

// confirmClock is the relay's transport, which records, by the phase and
// index in the body, when each routed publish was confirmed. The outbox
// has no hook for a row's publish; this sees exactly what the relay sees.
type confirmClock struct {
	transport.Transport
	cur atomic.Pointer[relayPhase]
}

func (c *confirmClock) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	conf, err := c.Transport.Publish(ctx, p)
	if err == nil && conf.Routed {
		at := time.Now()
		ph := c.cur.Load()
		if phase, i, ok := parseLatencyBody(p.Body); ok {
			ph.arrive(phase, i, at)
		} else {
			ph.bad.Add(1)
		}
	}
	return conf, err
}

// relayTable is the run's outbox table: the queue's name, which is unique
// to the run, round and system, as an identifier.
func relayTable(queue string) string { return strings.NewReplacer(".", "_", "-", "_").Replace(queue) }

// openRelayPools opens the writers' pool (one connection per writer) and
// the relay's (pgxpool's default size), as a service and its relay would
// have them: the writers never queue behind the relay for a connection.
func openRelayPools(ctx context.Context, e *env) (writers, relay *pgxpool.Pool, err error) {
	open := func(name string, conns int32) (*pgxpool.Pool, error) {
		pc, err := pgxpool.ParseConfig(e.cfg.postgresURL)
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL URL %s: %w", redact(e.cfg.postgresURL), err)
		}
		if conns > 0 {
			pc.MaxConns, pc.MinConns = conns, conns
		}
		pc.ConnConfig.RuntimeParams["application_name"] = name
		p, err := pgxpool.NewWithConfig(ctx, pc)
		if err == nil {
			err = p.Ping(ctx)
		}
		if err != nil {
			if p != nil {
				p.Close()
			}
			return nil, fmt.Errorf("connect to %s: %w", redact(e.cfg.postgresURL), err)
		}
		return p, nil
	}
	if writers, err = open("bench relay writers", int32(e.cfg.relayWriters)); err != nil {
		return nil, nil, err
	}
	if relay, err = open("bench relay", 0); err != nil {
		writers.Close()
		return nil, nil, err
	}
	return writers, relay, nil
}

func relayAcemq(ctx context.Context, e *env, m *meter) (err error) {
	wpool, rpool, err := openRelayPools(ctx, e)
	if err != nil {
		return err
	}
	defer wpool.Close()
	defer rpool.Close()
	table := relayTable(e.queue)
	o, err := outbox.New(rpool, outbox.WithTable(table))
	if err != nil {
		return err
	}
	if _, err := rpool.Exec(ctx, o.CreateTableSQL()); err != nil {
		return fmt.Errorf("create the outbox table %s: %w", table, err)
	}
	defer func() {
		_, derr := rpool.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+table+"; DROP FUNCTION IF EXISTS "+table+"_notify()")
		if err == nil && derr != nil {
			err = fmt.Errorf("drop the outbox table %s: %w", table, derr)
		}
	}()
	if err := e.admin.declare(e.queue); err != nil {
		return err
	}
	tr, err := rabbitmq.Dial(ctx, e.cfg.url,
		rabbitmq.WithInFlight(e.cfg.window), rabbitmq.WithPublishChannels(e.cfg.channels),
		rabbitmq.WithConnectionName("bench acemq relay"))
	if err != nil {
		return err
	}
	defer tr.Close()
	clock := &confirmClock{Transport: tr}
	relay, err := outbox.NewRelay(o, clock, outbox.WithConcurrency(e.cfg.window))
	if err != nil {
		return err
	}
	// start runs the relay until the returned stop; Run returns once every
	// goroutine it started has ended.
	start := func() (stop func() error) {
		rctx, cancel := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() { ran <- relay.Run(rctx) }()
		return func() error {
			cancel()
			if err := <-ran; err != nil {
				return fmt.Errorf("relay: %w", err)
			}
			return nil
		}
	}
	stop := start()
	defer func() {
		if stop != nil {
			if serr := stop(); err == nil {
				err = serr
			}
		}
	}()
	w := &relayWriters{pool: wpool, o: o, e: e, clock: clock}
	fig := &relayFigures{}
	m.relay = fig

	// Warm-up, untimed: a row per confirm channel, so that the transport's
	// channels and the relay's connections are open.
	if err := w.closedLoop(ctx, 0, e.cfg.channels); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	pg0, pgOK := postgresCPU(e.cfg.postgresURL)
	m.start()
	tput := w.closedLoop(ctx, 1, e.n)
	m.stop()
	if tput != nil {
		return tput
	}
	if pg1, ok := postgresCPU(e.cfg.postgresURL); ok && pgOK {
		fig.pgCPU = (pg1 - pg0) / time.Duration(e.n)
	}
	rate := float64(e.n) / m.elapsed.Seconds()
	paced := 0
	if e.cfg.relaySeconds > 0 {
		l, err := w.openLoop(ctx, 2, e.cfg.relayLoad*rate)
		if err != nil {
			return fmt.Errorf("latency at %.0f msgs/s: %w", e.cfg.relayLoad*rate, err)
		}
		l.load, l.maxRate = e.cfg.relayLoad, rate
		m.latency = append(m.latency, l)
		paced = l.n
	}

	// The two halves alone: the writers with no relay running, then the
	// relay draining what they wrote, with no writers.
	err, stop = stop(), nil
	if err != nil {
		return err
	}
	p := newRelayPhase(3, e.n, time.Now())
	clock.cur.Store(p)
	mark := markCPU(e.cfg.postgresURL, m.brokerPID)
	if err := publishAll(ctx, e.cfg.relayWriters, e.n, func(ctx context.Context, i int) error { return w.writeOne(ctx, p, i) }); err != nil {
		return fmt.Errorf("writers alone: %w", err)
	}
	fig.write = mark.since(e.n)
	mark = markCPU(e.cfg.postgresURL, m.brokerPID)
	stop = start()
	if err := w.drained(ctx, p, e.n); err != nil {
		return fmt.Errorf("relay alone: %w", err)
	}
	fig.drain = mark.since(e.n)

	// The whole path again with the table's NOTIFY trigger disabled and a
	// relay that polls every relayPoll instead: what PostgreSQL's commits
	// do without the notification, whose commit takes a lock every
	// notifying transaction in the server waits for (see README.md).
	err, stop = stop(), nil
	if err != nil {
		return err
	}
	if _, err := rpool.Exec(ctx, "ALTER TABLE "+table+" DISABLE TRIGGER "+table+"_notify"); err != nil {
		return fmt.Errorf("disable the NOTIFY trigger: %w", err)
	}
	if relay, err = outbox.NewRelay(o, clock, outbox.WithConcurrency(e.cfg.window), outbox.WithPollInterval(relayPoll)); err != nil {
		return err
	}
	stop = start()
	mark = markCPU(e.cfg.postgresURL, m.brokerPID)
	if err := w.closedLoop(ctx, 4, e.n); err != nil {
		return fmt.Errorf("without NOTIFY: %w", err)
	}
	fig.polled = mark.since(e.n)

	// The whole path again with the trigger as it was before the relay
	// said when it is awake: every commit notifies, whatever the relay is
	// doing. The before of the same run, for the ratio of the change.
	err, stop = stop(), nil
	if err != nil {
		return err
	}
	if _, err := rpool.Exec(ctx, "CREATE OR REPLACE FUNCTION "+table+"_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('"+table+"', ''); RETURN NULL; END $$; ALTER TABLE "+table+" ENABLE TRIGGER "+table+"_notify"); err != nil {
		return fmt.Errorf("put back the always-notifying trigger: %w", err)
	}
	if relay, err = outbox.NewRelay(o, clock, outbox.WithConcurrency(e.cfg.window)); err != nil {
		return err
	}
	stop = start()
	mark = markCPU(e.cfg.postgresURL, m.brokerPID)
	if err := w.closedLoop(ctx, 5, e.n); err != nil {
		return fmt.Errorf("always NOTIFY: %w", err)
	}
	fig.always = mark.since(e.n)
	if paced > 0 { // the same offered rate as the timed part's latency
		l, err := w.openLoop(ctx, 6, e.cfg.relayLoad*rate)
		if err != nil {
			return fmt.Errorf("always NOTIFY, latency: %w", err)
		}
		l.load, l.maxRate = e.cfg.relayLoad, rate
		fig.alwaysLatency = &l
		paced += l.n
	}
	return expectQueued(e, e.cfg.channels+e.n+paced+e.n+e.n+e.n)
}

// relayPoll is the poll interval of the relay run without NOTIFY.
const relayPoll = 10 * time.Millisecond
