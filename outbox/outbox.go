package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acemq/acemq/internal/pgident"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/internal/wire"
)

// Outbox is a PostgreSQL table of messages owed to the broker. A service
// writes to it inside its own transactions with [Outbox.Write]; a [Relay]
// publishes what committed. An Outbox is safe for concurrent use.
type Outbox struct {
	pool    *pgxpool.Pool
	name    pgident.Name
	q       queries
	maxBody int
}

// New returns an outbox on pool. It does no I/O: a missing table shows at
// the first Write or relay batch. A nil pool, a table name [WithTable] does
// not allow (wrapping [ErrInvalidTable]) or a maximum body size that is not
// positive is an error.
func New(pool *pgxpool.Pool, opts ...Option) (*Outbox, error) {
	cfg := config{table: DefaultTable, maxBody: DefaultMaxBodySize}
	for _, o := range opts {
		o.applyOutbox(&cfg)
	}
	if pool == nil {
		return nil, errors.New("acemq: outbox.New with a nil pool")
	}
	if cfg.maxBody <= 0 {
		return nil, fmt.Errorf("acemq: outbox.New with a maximum body size of %d; it must be positive", cfg.maxBody)
	}
	name, err := pgident.Parse(cfg.table, maxTableLen)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTable, err)
	}
	return &Outbox{pool: pool, name: name, q: newQueries(name), maxBody: cfg.maxBody}, nil
}

// CreateTableSQL returns the statements that create the table, its index,
// and the trigger that notifies relays of each insert, for a migration.
// They are idempotent; pgx runs them in one Exec call with no arguments.
// They need PostgreSQL 14 or later.
func (o *Outbox) CreateTableSQL() string { return o.q.create }

// Table is the table's name, as given to [WithTable]. It is also the
// channel relays LISTEN on (shortened to 63 bytes if longer).
func (o *Outbox) Table() string { return o.name.String() }

// Write adds msg to the outbox inside tx and returns its x-acemq-id. It is
// published only if tx commits: a rolled-back transaction owes nothing.
// The commit also notifies the relays if none is awake (a NOTIFY is
// delivered on commit and only then), so a running relay publishes at
// once; an awake one finds the row as it claims again.
//
// A message that could never be published is refused here rather than by
// the broker later: a malformed target or header wraps [ErrInvalidMessage],
// a body over [WithMaxBodySize] wraps [ErrTooLarge]. The trace context of
// ctx, if any, is stored with the headers, by the global propagator (W3C
// traceparent while that is otel's default, which propagates nothing):
// the relay's publish span is its child, so the consumer's span joins
// the writer's trace.
func (o *Outbox) Write(ctx context.Context, tx pgx.Tx, msg Message) (id string, err error) {
	if tx == nil {
		return "", errors.New("acemq: outbox write with a nil transaction")
	}
	h := make(map[string]any, len(msg.Headers)+2)
	for k, v := range msg.Headers {
		h[k] = v
	}
	telemetry.Propagator(nil).Inject(ctx, h)
	msg.Headers = h
	exchange, key, headers, err := msg.validate(o.maxBody)
	if err != nil {
		return "", fmt.Errorf("acemq: outbox write to %s: %w", target(exchange, key, msg), err)
	}
	id = msg.ID
	if id == "" {
		id = wire.NewID()
	}
	var hv any // SQL NULL for no headers
	if headers != nil {
		hv = string(headers)
	}
	body := msg.Body
	if body == nil {
		body = []byte{} // the column is NOT NULL; an empty body is a body
	}
	if _, err := tx.Exec(ctx, o.q.insert, id, exchange, key, hv, msg.ContentType, msg.CorrelationID, body); err != nil {
		return "", fmt.Errorf("acemq: outbox write of %s to %s: %w", id, target(exchange, key, msg), err)
	}
	return id, nil
}

// Stats is what the table holds now.
type Stats struct {
	// Pending is every row not yet published, those waiting out a backoff
	// included.
	Pending int64
	// Failing is the pending rows that have failed at least once.
	Failing int64
	// OldestAge is how long ago the oldest pending row was written (by the
	// database's clock); zero for an empty table.
	OldestAge time.Duration
}

// Stats counts the pending rows: a full scan, for dashboards and tests
// rather than for every request.
func (o *Outbox) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	var age float64
	if err := o.pool.QueryRow(ctx, o.q.stats).Scan(&s.Pending, &s.Failing, &age); err != nil {
		return Stats{}, fmt.Errorf("acemq: outbox stats of %s: %w", o.name, err)
	}
	s.OldestAge = time.Duration(age * float64(time.Second))
	return s, nil
}

// target describes where a message goes, for errors.
func target(exchange, key string, m Message) string {
	if exchange == "" && key == "" {
		exchange, key = m.Exchange, m.RoutingKey
		if m.Queue != "" {
			key = m.Queue
		}
	}
	if exchange == "" {
		return fmt.Sprintf("queue %q", key)
	}
	return fmt.Sprintf("exchange %q (key %q)", exchange, key)
}
