package outbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/transport"
)

// claimed is a batch: rows locked by the transaction tx, in write order.
type claimed struct {
	tx   pgx.Tx
	rows []row
	// more says there may be due rows left; cut that the batch stopped at
	// its byte budget, leaving rows it locked unclaimed until it ends.
	more, cut bool
}

// end rolls the batch's transaction back; a no-op after a commit.
func (b *claimed) end(ctx context.Context) { _ = b.tx.Rollback(context.WithoutCancel(ctx)) }

// claim begins a transaction and locks up to a batch of due rows in write
// order, skipping rows another transaction holds; it stops early at the
// batch's byte budget. With no rows (or an error) the transaction is over.
func (r *Relay) claim(ctx context.Context) (*claimed, error) {
	tx, err := r.o.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("acemq: outbox relay: begin: %w", err)
	}
	b := &claimed{tx: tx}
	if err := r.lock(ctx, b); err != nil || len(b.rows) == 0 {
		b.end(ctx)
		return nil, err
	}
	return b, nil
}

func (r *Relay) lock(ctx context.Context, b *claimed) error {
	res, err := b.tx.Query(ctx, r.o.q.claim, r.cfg.batch, inlineBody, maxStoredHeaders)
	if err != nil {
		return fmt.Errorf("acemq: outbox relay: claim: %w", err)
	}
	b.rows, err = pgx.CollectRows(res, func(cr pgx.CollectableRow) (row, error) {
		var s scanned
		if err := cr.Scan(s.dest()...); err != nil {
			return row{}, err
		}
		return s.row(r.o.maxBody), nil
	})
	if err != nil {
		return fmt.Errorf("acemq: outbox relay: claim: %w", err)
	}
	b.more = len(b.rows) == r.cfg.batch
	var used int64
	for i := range b.rows {
		x := &b.rows[i]
		if x.bad != nil {
			continue // never read, never published
		}
		if x.size > inlineBody {
			if i > 0 && used+x.size > batchBytes {
				b.rows, b.more, b.cut = b.rows[:i], true, true // the rest wait for the next batch
				return nil
			}
			if err := b.tx.QueryRow(ctx, r.o.q.body, x.seq).Scan(&x.body); err != nil {
				return fmt.Errorf("acemq: outbox relay: read the body of %s: %w", x.id, err)
			}
		}
		used += x.size
	}
	return nil
}

// outcome is what became of one row's publish.
type outcome uint8

const (
	untouched  outcome = iota // not published (stopping, or the transport closed): leave the row as it is
	published                 // confirmed and routed: delete the row
	unroutable                // confirmed, reached no queue: keep, retry
	failed                    // nacked, unconfirmed or refused: keep, retry
)

type result struct {
	outcome
	err       error
	confirmed time.Time
}

// publish sends one row with the wire contract's headers, under a
// producer span that is a child of the trace context stored with the row
// (the writer's, when Write had one) and whose context the message
// carries in its place. Whatever the row holds, the outcome is the row's:
// a row that cannot be published as it stands fails, and so does one
// whose publish panics (the panic is logged with its stack), so that one
// row never stops the relay nor the rest of its batch.
func (r *Relay) publish(ctx context.Context, x *row) (res result) {
	defer func() {
		if v := recover(); v != nil {
			msg := fmt.Sprint(v)
			r.in.failed.Add(ctx, 1, r.in.other)
			r.log.Error("outbox message panicked as it was published; it stays and will be retried",
				zap.Int64("seq", x.seq), zap.String("id", x.id), zap.String("panic", msg), zap.Stack("stack"))
			res = result{outcome: failed, err: fmt.Errorf("acemq: outbox relay: publishing the row panicked: %s", msg)}
		}
	}()
	pub, err := publishing(x)
	if err != nil {
		r.in.failed.Add(ctx, 1, r.in.other)
		return result{outcome: failed, err: err}
	}
	ctx, span := telemetry.StartPublish(r.prop.Extract(ctx, pub.Headers), r.tracer,
		telemetry.Publish{Exchange: pub.Exchange, RoutingKey: pub.RoutingKey, ID: x.id, CorrelationID: pub.CorrelationID, BodySize: len(pub.Body)},
		r.table)
	defer span.End()
	r.prop.Inject(ctx, pub.Headers)
	c, err := r.t.Publish(ctx, pub)
	switch {
	case err == nil && c.Routed:
		return result{outcome: published, confirmed: time.Now()}
	case err == nil && r.cfg.unroutableOK[pub.Exchange]:
		r.in.unroutable.Add(ctx, 1, r.in.dropped)
		return result{outcome: published, confirmed: time.Now()}
	case err == nil:
		r.in.unroutable.Add(ctx, 1, r.in.kept)
		telemetry.Fail(span, telemetry.Unroutable, errUnroutable)
		return result{outcome: unroutable, err: errUnroutable}
	}
	telemetry.Fail(span, "", err)
	switch {
	case errors.Is(err, transport.ErrClosed), errors.Is(err, transport.ErrBlocked), errors.Is(err, transport.ErrStalled), ctx.Err() != nil:
		// Nothing wrong with the message (ErrBlocked and ErrStalled: not
		// sent): the row is left as it was.
		return result{outcome: untouched, err: err}
	case errors.Is(err, transport.ErrNacked):
		r.in.failed.Add(ctx, 1, r.in.nacked)
	case errors.Is(err, transport.ErrUnconfirmed):
		r.in.failed.Add(ctx, 1, r.in.unconfirmed)
	default:
		r.in.failed.Add(ctx, 1, r.in.other)
	}
	return result{outcome: failed, err: err}
}

// errUnroutable is the last error of a row whose message reached no queue.
var errUnroutable = errors.New("acemq: message reached no queue (confirmed, but no queue is bound for it)")

// settle deletes the published rows, records the failures with their next
// attempt, and commits. A failed commit leaves every row as it was: the
// published ones go out again, with the same ids.
func (r *Relay) settle(ctx context.Context, b *claimed, results []result) error {
	defer b.end(ctx)
	tx, rows := b.tx, b.rows
	var done, seqs, delays []int64
	var errs []string
	var closed, blocked error
	for i, res := range results {
		x := &rows[i]
		switch res.outcome {
		case published:
			done = append(done, x.seq)
		case unroutable, failed:
			wait := backoff(r.cfg.backoffMin, r.cfg.backoffMax, int(x.attempts))
			seqs, errs, delays = append(seqs, x.seq), append(errs, lastError(res.err)), append(delays, wait.Microseconds())
			r.log.Warn("outbox message not published; it stays and will be retried",
				zap.Int64("seq", x.seq), zap.String("id", x.id), zap.String("exchange", x.exchange), zap.String("routing_key", x.key),
				zap.Int32("attempts", min(x.attempts, math.MaxInt32-1)+1), zap.Stringer("retry_in", wait), zap.Error(res.err))
		case untouched:
			switch {
			case errors.Is(res.err, transport.ErrClosed):
				closed = res.err
			case errors.Is(res.err, transport.ErrBlocked):
				blocked = res.err
			}
		}
	}
	if len(done) > 0 {
		if _, err := tx.Exec(ctx, r.o.q.remove, done); err != nil {
			return r.notRecorded(len(done), err)
		}
	}
	if len(seqs) > 0 {
		if _, err := tx.Exec(ctx, r.o.q.fail, seqs, errs, delays); err != nil {
			return r.notRecorded(len(done), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return r.notRecorded(len(done), err)
	}
	if len(done) > 0 {
		r.in.published.Add(ctx, int64(len(done)), r.in.add)
		for i, res := range results {
			if res.outcome == published {
				r.in.lag.Record(ctx, res.confirmed.Sub(rows[i].created).Seconds(), r.in.record)
			}
		}
	}
	switch {
	case closed != nil:
		return errClosed
	case blocked != nil: // the whole relay waits, not each row
		return fmt.Errorf("acemq: outbox relay: the broker refuses publishes: %w", blocked)
	}
	return nil
}

// notRecorded is the error of a batch whose outcome did not commit.
func (r *Relay) notRecorded(published int, err error) error {
	return fmt.Errorf("acemq: outbox relay: record the batch (%d published; they stay and will be published again with the same ids): %w", published, err)
}
