package rabbitmq

import (
	"crypto/tls"
	"time"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/internal/logging"
	"go.uber.org/zap"
)

// Option configures Dial.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what the options set; defaults come from defaultConfig.
type config struct {
	urls           []string
	name           string
	tls            *tls.Config
	logger         *zap.Logger
	backoff        amqpconn.Backoff
	heartbeat      time.Duration
	dialTimeout    time.Duration
	channels       int
	inFlight       int
	confirmTimeout time.Duration
	stallAfter     time.Duration

	connPerConsumer bool
}

// Defaults, chosen for a service publishing from a few dozen goroutines.
const (
	DefaultPublishChannels = 4
	DefaultInFlight        = 256
	DefaultConfirmTimeout  = 30 * time.Second
)

func defaultConfig(url string) config {
	return config{
		urls:           []string{url},
		name:           "acemq",
		logger:         logging.Or(nil),
		backoff:        amqpconn.DefaultBackoff,
		dialTimeout:    30 * time.Second,
		channels:       DefaultPublishChannels,
		inFlight:       DefaultInFlight,
		confirmTimeout: DefaultConfirmTimeout,
		stallAfter:     DefaultStallAfter,

		connPerConsumer: true,
	}
}

// WithURLs adds further nodes of the same cluster. Dial tries them in order
// after the first URL; a reconnect moves on to the node after the lost one.
func WithURLs(urls ...string) Option {
	return optionFunc(func(c *config) { c.urls = append(c.urls, urls...) })
}

// WithConnectionName names the connections in the broker's management UI and
// rabbitmqctl list_connections; the two connections get " consume" and
// " publish" appended. The default is "acemq".
func WithConnectionName(name string) Option {
	return optionFunc(func(c *config) { c.name = name })
}

// WithTLS sets the TLS configuration for amqps:// URLs. Without it an
// amqps:// URL uses the system roots and the URL's host as server name.
func WithTLS(cfg *tls.Config) Option {
	return optionFunc(func(c *config) { c.tls = cfg })
}

// WithLogger sets the logger for connection events (lost, blocked,
// reconnected, re-declaration failures); acemq.FromSlog makes one of a
// *slog.Logger. Without it, warnings and errors go to slog.Default();
// zap.NewNop() logs nothing. Passwords never appear in what is logged.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithBackoff sets the wait between reconnect attempts: doubling from min up
// to max, jittered. The default is 100ms to 10s. A connection that dies
// within 5s of opening, twice or more in a row, starts its next reconnect
// one doubling further up each time, so that a connection killed on every
// open is redialled ever more slowly, up to max.
func WithBackoff(min, max time.Duration) Option {
	return optionFunc(func(c *config) { c.backoff = amqpconn.Backoff{Min: min, Max: max, Jitter: true} })
}

// WithHeartbeat sets the AMQP heartbeat interval, which bounds how long a
// dead TCP connection goes unnoticed. The default is amqp091-go's (10s).
func WithHeartbeat(d time.Duration) Option {
	return optionFunc(func(c *config) { c.heartbeat = d })
}

// WithDialTimeout bounds one connection attempt (TCP, TLS and AMQP
// handshakes). The default is 30s.
func WithDialTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.dialTimeout = d
		}
	})
}

// WithPublishChannels sets how many confirm-mode channels publishes are
// spread over. The default is DefaultPublishChannels.
func WithPublishChannels(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.channels = n
		}
	})
}

// WithInFlight bounds the publishes awaiting a confirm across all publish
// channels; a Publish beyond it waits for a free slot (or its ctx). It also
// sizes the buffers that receive returns, so that amqp091-go never finds
// them full. The default is DefaultInFlight.
func WithInFlight(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.inFlight = n
		}
	})
}

// WithStallAfter sets how long publishes may await a confirm with none
// coming before the transport calls the broker stalled: it logs a
// warning, and Check (a server's readiness) fails with
// transport.ErrStalled until a confirm comes or the publish connection is
// replaced. Meanwhile one publish at a time is sent, and the others are
// refused unsent with transport.ErrStalled. Zero turns it off. The default is DefaultStallAfter.
func WithStallAfter(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d >= 0 {
			c.stallAfter = d
		}
	})
}

// WithConfirmTimeout bounds the wait for one confirm; past it Publish
// returns transport.ErrUnconfirmed. The default is DefaultConfirmTimeout.
func WithConfirmTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.confirmTimeout = d
		}
	})
}

// WithConnectionPerConsumer says whether each subscription gets a
// connection of its own (on, the default) or shares the transport's
// consume connection with every other subscription, Declare, Inspect and
// Get (off).
//
// On by default because amqp091-go closes a whole connection when it
// cannot read one delivery (headers nested deeper than 32 levels, or over
// 8192 entries: RabbitMQ accepts them). On a shared connection that one
// message, redelivered at the head of its queue after every reconnect,
// takes every other queue's channel with it, again and again: their
// unsettled deliveries and the acks not yet sent are lost each time, and
// healthy messages are handled over and over. With a connection each, only
// the poisoned queue's consumer reconnects (ever more slowly, see
// WithBackoff), and the log names its queue.
//
// The cost, measured on RabbitMQ 3.10.8 on one machine: a TCP and AMQP
// handshake more per Consume (Consume took 7.6ms instead of 1.4ms; over
// a network add a few round trips, and the TLS handshake with amqps),
// about 65KB more of broker memory per subscription than a channel on a
// shared connection (about 85KB against 20KB), three goroutines more in
// the client and a heartbeat each. Turn it off for a process consuming
// hundreds of queues, or under a connection limit.
func WithConnectionPerConsumer(on bool) Option {
	return optionFunc(func(c *config) { c.connPerConsumer = on })
}
