package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq/outbox"
)

// relayWriters writes the rows of a relay run, one per transaction.
type relayWriters struct {
	pool  *pgxpool.Pool
	o     *outbox.Outbox
	e     *env
	clock *confirmClock
}

// writeOne commits row i of phase p in a transaction of its own and
// records when the commit returned.
func (w *relayWriters) writeOne(ctx context.Context, p *relayPhase, i int) error {
	body := latencyBody(w.e.cfg.bodySize, p.id, i)
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := w.o.Write(ctx, tx, outbox.Message{Queue: w.e.queue, Body: body, ContentType: "application/json"}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	p.commit(i, time.Now())
	return nil
}

// closedLoop writes n rows from the writers as fast as they commit, and
// returns once the relay has published every one and the table is empty.
func (w *relayWriters) closedLoop(ctx context.Context, phase, n int) error {
	p := newRelayPhase(phase, n, time.Now())
	w.clock.cur.Store(p)
	if err := publishAll(ctx, w.e.cfg.relayWriters, n, func(ctx context.Context, i int) error { return w.writeOne(ctx, p, i) }); err != nil {
		return err
	}
	return w.drained(ctx, p, n)
}

// drained waits for the relay to have published n rows of p, none twice
// nor foreign, and for the table to be empty: the last row deleted.
func (w *relayWriters) drained(ctx context.Context, p *relayPhase, n int) error {
	if err := p.wait(ctx, n); err != nil {
		return err
	}
	if err := w.empty(ctx); err != nil {
		return err
	}
	if d, b := p.dups.Load(), p.bad.Load(); d > 0 || b > 0 {
		return fmt.Errorf("phase %d: %d duplicate publishes, %d of another phase or unreadable", p.id, d, b)
	}
	return nil
}

// empty polls until the outbox table holds no row: the relay deletes a
// batch after its confirms, in a transaction of its own.
func (w *relayWriters) empty(ctx context.Context) error {
	deadline := time.Now().Add(stall)
	for {
		s, err := w.o.Stats(ctx)
		if err != nil {
			return err
		}
		if s.Pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d rows still in the outbox %s after every publish was confirmed", s.Pending, w.o.Table())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// openLoop offers rate rows a second for cfg.relaySeconds: the pacer hands
// row i to a writer at t0 + i/rate, never waiting for the writers or the
// relay. It returns the commit → confirm percentiles.
func (w *relayWriters) openLoop(ctx context.Context, phase int, rate float64) (loadLatency, error) {
	n := max(1, int(rate*w.e.cfg.relaySeconds.Seconds()))
	out := make(chan int, n)
	pcx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	p := newRelayPhase(phase, n, t0)
	w.clock.cur.Store(p)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range w.e.cfg.relayWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range out {
				if err := w.writeOne(pcx, p, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	pace(pcx, t0, rate, n, out)
	close(out)
	wg.Wait()
	if first != nil {
		return loadLatency{}, first
	}
	if err := ctx.Err(); err != nil {
		return loadLatency{}, err
	}
	if err := w.drained(ctx, p, n); err != nil {
		return loadLatency{}, err
	}
	lat := p.latencies()
	if len(lat) != n {
		return loadLatency{}, errors.New("a row confirmed without its commit recorded")
	}
	q := percentiles(lat, 0.50, 0.99, 0.999, 1)
	return loadLatency{rate: rate, n: n, p50: q[0], p99: q[1], p999: q[2], max: q[3]}, nil
}
