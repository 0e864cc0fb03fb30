package outbox

import (
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// Defaults of [New] and [NewRelay].
const (
	// DefaultTable is the outbox table unless [WithTable] names another.
	DefaultTable = "acemq_outbox"
	// DefaultMaxBodySize is 16 MiB: RabbitMQ 4's default max_message_size,
	// well below 3.x's 128 MiB, so a message accepted here is accepted by
	// either broker with its default settings.
	DefaultMaxBodySize = 16 << 20
	// DefaultBatchSize is how many rows a relay claims at a time.
	DefaultBatchSize = 256
	// DefaultConcurrency is how many publishes a relay keeps awaiting a
	// confirm at once.
	DefaultConcurrency = 64
	// DefaultPollInterval is how often a relay looks for due rows when no
	// notification woke it.
	DefaultPollInterval = time.Second
	// DefaultBackoffMin and DefaultBackoffMax bound the wait before a
	// message that failed is tried again: doubling per attempt from the
	// first to the second.
	DefaultBackoffMin = time.Second
	DefaultBackoffMax = 5 * time.Minute
	// DefaultStopTimeout is how long a stopping relay waits for the
	// publishes it started and for the deletes that record them.
	DefaultStopTimeout = 10 * time.Second
)

// Option configures [New]. The interface is sealed: the options are the
// With* functions of this package that return an Option.
type Option interface{ applyOutbox(*config) }

// RelayOption configures [NewRelay]. The interface is sealed: the options
// are the With* functions of this package that return a RelayOption.
type RelayOption interface{ applyRelay(*relayConfig) }

type config struct {
	table   string
	maxBody int
}

type relayConfig struct {
	batch       int
	concurrency int
	poll        time.Duration
	backoffMin  time.Duration
	backoffMax  time.Duration
	stopTimeout time.Duration
	logger      *zap.Logger
	meters      metric.MeterProvider
	tracers     trace.TracerProvider
	propagator  propagation.TextMapPropagator
	// unroutableOK are the exchanges whose messages may reach no queue:
	// events fanned out to whoever subscribes, none included.
	unroutableOK map[string]bool
}

// WithTable names the outbox table, optionally schema-qualified
// ("app.outbox"); [DefaultTable] unless given. Each part is a lower-case
// identifier of letters, digits and underscores; the table part at most 48
// bytes (the names of its index, trigger and function are built from it).
// Anything else makes [New] return an error wrapping [ErrInvalidTable].
func WithTable(name string) Option { return tableOption(name) }

// WithMaxBodySize sets the largest body [Outbox.Write] accepts, in bytes;
// [DefaultMaxBodySize] unless given. Raise it only together with the
// broker's max_message_size: a body the broker refuses would be retried
// forever. A relay holds rows another writer made to it too: a larger
// body is its row's failure, and is never read.
func WithMaxBodySize(n int) Option { return maxBodyOption(n) }

// WithBatchSize sets how many rows a relay claims in one transaction;
// [DefaultBatchSize] unless given. A batch also stops at 32 MiB of bodies
// (or at its first row, if that alone is larger).
func WithBatchSize(n int) RelayOption { return batchOption(n) }

// WithConcurrency sets how many of a relay's publishes may await their
// confirm at once; [DefaultConcurrency] unless given. One tries messages
// strictly in write order, each only after the one before it was confirmed
// or failed; more is faster but lets messages published together overtake
// each other on the way to the broker (see "Ordering" in the package
// documentation).
func WithConcurrency(n int) RelayOption { return concurrencyOption(n) }

// WithPollInterval sets how often a relay looks for due rows without being
// woken by a notification; [DefaultPollInterval] unless given. It bounds the
// delay of a message whose notification was missed (the listening
// connection was down) and of a retry that came due.
func WithPollInterval(d time.Duration) RelayOption { return pollOption(d) }

// WithBackoff sets the wait before a failed message is tried again: min
// after its first failure, doubling per failure up to max;
// [DefaultBackoffMin] and [DefaultBackoffMax] unless given. The relay's own
// reconnect waits (lost database) use the same bounds, capped at 30s.
func WithBackoff(min, max time.Duration) RelayOption { return backoffOption{min, max} }

// WithStopTimeout sets how long [Relay.Run], once its ctx has ended, waits
// for the publishes already started and for the transaction that deletes
// the confirmed ones; [DefaultStopTimeout] unless given. Publishes still
// unconfirmed then are abandoned: their rows stay and are published again,
// with the same id.
func WithStopTimeout(d time.Duration) RelayOption { return stopTimeoutOption(d) }

// WithLogger sets the relay's logger; acemq.FromSlog makes one of a
// *slog.Logger. Failed publishes are logged at Warn, lost database
// connections and transactions that could not record a publish at Error;
// without a logger these go to slog.Default(), and zap.NewNop() logs
// nothing. Passwords never appear in what is logged.
func WithLogger(l *zap.Logger) RelayOption { return loggerOption{l} }

// WithUnroutableOK names exchanges whose messages may legitimately reach
// no queue: events fanned out to whoever is bound, nobody included (a
// topic before its first subscriber). Such a message, confirmed by the
// broker and routed nowhere, counts as published: its row is deleted and
// acemq.outbox.unroutable counts it with dropped=true, instead of staying
// in the table for ever with "message reached no queue". Every other
// message still must reach a queue. The default exchange cannot be named:
// a message to it names a queue, and one that reaches none is a mistake
// to keep.
func WithUnroutableOK(exchanges ...string) RelayOption { return unroutableOption(exchanges) }

// WithMeterProvider sets where the relay's metrics go (see "Metrics" in the
// package documentation); the global provider (otel.GetMeterProvider)
// unless given.
func WithMeterProvider(mp metric.MeterProvider) RelayOption { return meterOption{mp} }

// WithTracerProvider sets where the relay's spans go (see "Tracing" in the
// package documentation); the global provider (otel.GetTracerProvider)
// unless given.
func WithTracerProvider(tp trace.TracerProvider) RelayOption { return tracerOption{tp} }

// WithPropagator sets how the relay reads the trace context stored with a
// row and writes its publish span's into the message; the global
// propagator as NewRelay finds it (otel.GetTextMapPropagator) unless
// given, or W3C trace context while that is otel's default, which
// propagates nothing. [Outbox.Write] stores trace context with the same
// default: set the global propagator, not this, to change both.
func WithPropagator(p propagation.TextMapPropagator) RelayOption { return propagatorOption{p} }

type tableOption string

func (o tableOption) applyOutbox(c *config) { c.table = string(o) }

type maxBodyOption int

func (o maxBodyOption) applyOutbox(c *config) { c.maxBody = int(o) }

type unroutableOption []string

func (o unroutableOption) applyRelay(c *relayConfig) {
	if c.unroutableOK == nil {
		c.unroutableOK = map[string]bool{}
	}
	for _, x := range o {
		c.unroutableOK[x] = true
	}
}

type batchOption int

func (o batchOption) applyRelay(c *relayConfig) { c.batch = int(o) }

type concurrencyOption int

func (o concurrencyOption) applyRelay(c *relayConfig) { c.concurrency = int(o) }

type pollOption time.Duration

func (o pollOption) applyRelay(c *relayConfig) { c.poll = time.Duration(o) }

type backoffOption struct{ min, max time.Duration }

func (o backoffOption) applyRelay(c *relayConfig) { c.backoffMin, c.backoffMax = o.min, o.max }

type stopTimeoutOption time.Duration

func (o stopTimeoutOption) applyRelay(c *relayConfig) { c.stopTimeout = time.Duration(o) }

type loggerOption struct{ l *zap.Logger }

func (o loggerOption) applyRelay(c *relayConfig) { c.logger = o.l }

type meterOption struct{ mp metric.MeterProvider }

func (o meterOption) applyRelay(c *relayConfig) { c.meters = o.mp }

type tracerOption struct{ tp trace.TracerProvider }

func (o tracerOption) applyRelay(c *relayConfig) { c.tracers = o.tp }

type propagatorOption struct{ p propagation.TextMapPropagator }

func (o propagatorOption) applyRelay(c *relayConfig) { c.propagator = o.p }
