package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	ibackoff "github.com/acemq/acemq/internal/backoff"
	"github.com/acemq/acemq/internal/logging"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/transport"
)

// maxRetryWait caps the relay's wait after a batch failed as a whole (a
// lost database connection), whatever WithBackoff says.
const maxRetryWait = 30 * time.Second

// Relay publishes what an [Outbox] holds: it claims due rows in write
// order, publishes each with confirms, mandatory and persistent, and
// deletes a row only once the broker confirmed its message and a queue
// took it. Several relays, in one process or many, may run on one table:
// each row is claimed by one of them at a time (FOR UPDATE SKIP LOCKED).
type Relay struct {
	o   *Outbox
	t   transport.Transport
	cfg relayConfig
	log *zap.Logger
	in  *instruments
	// The producer span of each publish.
	tracer trace.Tracer
	prop   telemetry.Propagation
	table  attribute.KeyValue
}

// NewRelay returns a relay from o to t. Like every constructor here it
// starts nothing; [Relay.Run] does the work. A nil outbox or transport, or
// an option value that is not positive (a batch size, a concurrency, an
// interval, a backoff whose max is below its min), is an error.
func NewRelay(o *Outbox, t transport.Transport, opts ...RelayOption) (*Relay, error) {
	cfg := relayConfig{
		batch: DefaultBatchSize, concurrency: DefaultConcurrency, poll: DefaultPollInterval,
		backoffMin: DefaultBackoffMin, backoffMax: DefaultBackoffMax, stopTimeout: DefaultStopTimeout,
	}
	for _, opt := range opts {
		opt.applyRelay(&cfg)
	}
	switch {
	case o == nil:
		return nil, errors.New("acemq: outbox.NewRelay with a nil outbox")
	case t == nil:
		return nil, errors.New("acemq: outbox.NewRelay with a nil transport")
	case cfg.batch <= 0:
		return nil, fmt.Errorf("acemq: outbox.NewRelay with a batch size of %d; it must be positive", cfg.batch)
	case cfg.concurrency <= 0:
		return nil, fmt.Errorf("acemq: outbox.NewRelay with a concurrency of %d; it must be positive", cfg.concurrency)
	case cfg.poll <= 0:
		return nil, fmt.Errorf("acemq: outbox.NewRelay with a poll interval of %s; it must be positive", cfg.poll)
	case cfg.backoffMin <= 0 || cfg.backoffMax < cfg.backoffMin:
		return nil, fmt.Errorf("acemq: outbox.NewRelay with a backoff from %s to %s; want 0 < min <= max", cfg.backoffMin, cfg.backoffMax)
	case cfg.unroutableOK[""]:
		return nil, errors.New("acemq: outbox.NewRelay with WithUnroutableOK of the default exchange; its messages name a queue, and one that reaches none must be kept")
	case cfg.stopTimeout <= 0:
		return nil, fmt.Errorf("acemq: outbox.NewRelay with a stop timeout of %s; it must be positive", cfg.stopTimeout)
	}
	log := logging.Or(cfg.logger).With(zap.String("outbox", o.Table()))
	return &Relay{o: o, t: t, cfg: cfg, log: log, in: newInstruments(cfg.meters, o.Table()),
		tracer: telemetry.Tracer(cfg.tracers, meterName), prop: telemetry.Propagator(cfg.propagator),
		table: attribute.String("acemq.outbox.table", o.Table())}, nil
}

// Run relays until ctx ends, then records the publishes it started (within
// [WithStopTimeout]) and returns nil once every goroutine it started has
// ended. It wakes on the outbox's notifications, and every poll interval
// without them. Trouble that may pass (a lost database connection, a
// broker that refuses a message) is logged and retried with backoff, and
// Run carries on; it returns an error only when relaying cannot go on: the
// table does not exist (create it with [Outbox.CreateTableSQL]), or the
// transport was closed (wrapping transport.ErrClosed).
//
// Run may be called again after it returned, and several Runs of one Relay
// may run at once: each behaves as a relay of its own.
func (r *Relay) Run(ctx context.Context) error {
	if reg, err := r.in.observe(r.o); err == nil {
		defer func() { _ = reg.Unregister() }()
	}
	work, stopWork := r.workContext(ctx)
	defer stopWork()

	wake := make(chan struct{}, 1)
	lctx, stopListening := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.listen(lctx, wake)
	}()
	defer func() {
		stopListening()
		wg.Wait()
	}()

	p := newPipeline(r, work)
	defer func() {
		if err := p.close(); err != nil {
			r.log.Error("outbox relay batch failed as it stopped", zap.Error(err))
		}
	}()
	aw := &awake{r: r}
	defer aw.close(ctx)
	failures := 0
	for {
		more, found, err := p.step(ctx)
		switch {
		case err == nil:
			failures = 0
		case isFatal(err):
			if !errors.Is(err, transport.ErrClosed) {
				err = fmt.Errorf("acemq: outbox relay on %s: the table is missing or not as CreateTableSQL makes it: %w", r.o.Table(), err)
			}
			r.log.Error("outbox relay stopped", zap.Error(err))
			return err
		default:
			failures++
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			aw.release(work) // it claims after the backoff anyway
			wait := backoff(r.cfg.backoffMin, min(r.cfg.backoffMax, maxRetryWait), failures-1)
			r.log.Error("outbox relay batch failed; retrying", zap.Error(err),
				zap.Int("failures", failures), zap.Stringer("retry_in", wait))
			_ = ibackoff.Sleep(ctx, nil, wait, nil) // a notification does not cut a backoff short
		case found && more:
			// Awake: the writers need not notify (awake.go), and a full
			// batch claims again at once.
			aw.take(work)
		case found:
			aw.take(work)
			r.rest(ctx, aw, wake) // a partial batch: the relay caught up
		default:
			r.rest(ctx, aw, wake) // nothing due
		}
	}
}

// rest is what a relay that caught up does before it claims again: if it
// holds the awake lock and may let go of it (no writer's transaction is
// open), it does and claims once more at once, to find what committed
// before; else it claims again after awakePoll, or sooner when notified.
func (r *Relay) rest(ctx context.Context, aw *awake, wake <-chan struct{}) {
	if aw.held && aw.sleep(ctx) {
		return
	}
	if aw.held {
		_ = ibackoff.Sleep(ctx, nil, awakePoll, wake)
		return
	}
	_ = ibackoff.Sleep(ctx, nil, r.cfg.poll, wake)
}

// workContext is the context of a batch's database work and publishes: it
// outlives ctx by the stop timeout, so that a stopping relay records what
// it published instead of publishing it again later.
func (r *Relay) workContext(ctx context.Context) (context.Context, func()) {
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var timer *time.Timer
	finished := false
	stopWatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			timer = time.AfterFunc(r.cfg.stopTimeout, cancel)
		}
	})
	return work, func() {
		stopWatch()
		mu.Lock()
		finished = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

// errClosed is the batch error that ends Run: the transport is gone.
var errClosed = fmt.Errorf("acemq: outbox relay: %w", transport.ErrClosed)

// isFatal says whether err stops Run: a missing table or column (a
// migration not run), or a closed transport. Everything else may pass.
func isFatal(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "42P01" || pgErr.Code == "42703" // undefined_table, undefined_column
	}
	return errors.Is(err, transport.ErrClosed)
}

// backoff is the relay's wait before retry n: lo doubled n times, capped at
// hi. It is unjittered because the package doc promises next_attempt_at a
// wait that doubles per failure, and retry_in in the log says that wait.
// The cap wins over lo (a WithBackoff minimum above maxRetryWait is cut to
// it), hence min(lo, hi).
func backoff(lo, hi time.Duration, n int) time.Duration {
	return ibackoff.Policy{Min: min(lo, hi), Max: hi}.Delay(n)
}
