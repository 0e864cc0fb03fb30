package idempotency

import (
	"time"

	"github.com/acemq/acemq/transport"
)

// Option configures either store: it is both a [MemoryOption] and a
// [PostgresOption].
type Option interface {
	MemoryOption
	PostgresOption
}

// MemoryOption configures a [Memory] store. The interface is sealed: the
// options are the With* functions of this package.
type MemoryOption interface{ applyMemory(*memoryConfig) }

// PostgresOption configures a [Postgres] store. The interface is sealed: the
// options are the With* functions of this package.
type PostgresOption interface{ applyPostgres(*postgresConfig) }

// shared holds the settings both stores have.
type shared struct {
	lease time.Duration
	now   func() time.Time // nil: the store's natural clock
}

type memoryConfig struct {
	shared
	maxEntries int
}

type postgresConfig struct {
	shared
	table     string
	retention time.Duration
}

// WithLease sets how long a claim that is neither confirmed nor released
// holds its id; [DefaultLease] unless given. While it holds, every other
// claim of the id is [InProgress]. The lease is the only way a store learns
// that a claimer died: nothing else frees an id whose consumer was killed
// mid-handler. Choosing it is a trade between two failures:
//
//   - Too short: a handler still running when its lease ends no longer
//     holds the id, and a redelivery of its message (its connection
//     dropped, or the publisher sent it twice) runs the work a second time,
//     at once. Keep the lease above the slowest handler; middleware.Timeout
//     in front of a handler that heeds its context makes that a bound
//     rather than a hope.
//   - Too long: a message whose claimer crashed is [InProgress] until the
//     lease ends, and waits that long before it is handled.
//     middleware.Idempotent snoozes it until the lease can have ended, so
//     it spends no attempt and is never lost, only late. A failed Release
//     holds the id the same way.
//
// So: the slowest handler's time with a margin. The retry ladder need not
// span the lease.
func WithLease(d time.Duration) Option { return leaseOption(d) }

// WithClock replaces the store's clock, so tests can move time without
// sleeping: a memory broker's virtual clock (memory.Broker.Clock), say,
// the one the server under test tells time by. The store reads only its
// Now. A [Memory] store otherwise reads the monotonic clock; a [Postgres]
// store otherwise uses the database's now(), one clock for every
// instance, which is what production wants. A nil c is no clock given.
func WithClock(c transport.Clock) Option {
	if c == nil {
		return clockOption(nil)
	}
	return clockOption(c.Now)
}

// WithMaxEntries bounds a [Memory] store to n ids; [DefaultMaxEntries]
// unless given. Past it the oldest confirmed id is evicted, which is a
// claim forgotten early: watch [Memory.Evictions].
func WithMaxEntries(n int) MemoryOption { return maxEntriesOption(n) }

// WithTable names the [Postgres] store's table, optionally schema-qualified
// ("acemq.idempotency"); [DefaultTable] unless given. Each part is a
// lower-case identifier of letters, digits and underscores, at most 63
// bytes; anything else makes [NewPostgres] return [ErrInvalidTable].
func WithTable(name string) PostgresOption { return tableOption(name) }

// WithRetention sets how long a [Postgres] store remembers a confirmed id;
// [DefaultRetention] unless given. Redeliveries and replays later than that
// are handled again. Only [Postgres.Cleanup] deletes rows; an id past its
// retention but not yet deleted can be claimed again all the same.
func WithRetention(d time.Duration) PostgresOption { return retentionOption(d) }

type leaseOption time.Duration

func (o leaseOption) applyMemory(c *memoryConfig)     { c.lease = time.Duration(o) }
func (o leaseOption) applyPostgres(c *postgresConfig) { c.lease = time.Duration(o) }

type clockOption func() time.Time

func (o clockOption) applyMemory(c *memoryConfig)     { c.now = o }
func (o clockOption) applyPostgres(c *postgresConfig) { c.now = o }

type maxEntriesOption int

func (o maxEntriesOption) applyMemory(c *memoryConfig) { c.maxEntries = int(o) }

type tableOption string

func (o tableOption) applyPostgres(c *postgresConfig) { c.table = string(o) }

type retentionOption time.Duration

func (o retentionOption) applyPostgres(c *postgresConfig) { c.retention = time.Duration(o) }
