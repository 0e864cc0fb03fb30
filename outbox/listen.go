package outbox

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	ibackoff "github.com/acemq/acemq/internal/backoff"
)

// closeTimeout bounds closing the listening connection.
const closeTimeout = 5 * time.Second

// listen keeps a connection of its own LISTENing on the outbox's channel
// and signals wake on every notification, until ctx ends. A lost
// connection is logged and replaced with backoff; meanwhile polling
// carries on, and wake is signalled once the new connection listens, for
// the notifications missed.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	for failures := 0; ; failures++ {
		err := r.listenOnce(ctx, wake, func() { failures = 0 })
		if ctx.Err() != nil {
			return
		}
		wait := backoff(r.cfg.backoffMin, min(r.cfg.backoffMax, maxRetryWait), failures)
		r.log.Warn("outbox relay lost its LISTEN connection; polling until it is back",
			zap.Error(err), zap.Stringer("retry_in", wait))
		if ibackoff.Sleep(ctx, nil, wait, nil) != nil {
			return
		}
	}
}

// listenOnce takes a connection out of the pool for good (LISTEN belongs to
// a session, which must not go back to the pool still listening), listens,
// and waits for notifications until the connection fails or ctx ends.
func (r *Relay) listenOnce(ctx context.Context, wake chan<- struct{}, listening func()) error {
	pc, err := r.o.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acemq: outbox relay: acquire a connection to listen on: %w", err)
	}
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, r.o.q.listen); err != nil {
		return fmt.Errorf("acemq: outbox relay: %s: %w", r.o.q.listen, err)
	}
	listening()
	signal(wake)
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("acemq: outbox relay: wait for a notification: %w", err)
		}
		signal(wake)
	}
}

// signal wakes the relay without blocking: one pending wake is enough.
func signal(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
