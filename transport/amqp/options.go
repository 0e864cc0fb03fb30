package rabbitmq

import (
	"crypto/tls"
	"time"

	"github.com/acemq/acemq/internal/amqpconn"
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
		logger:         zap.NewNop(),
		backoff:        amqpconn.DefaultBackoff,
		dialTimeout:    30 * time.Second,
		channels:       DefaultPublishChannels,
		inFlight:       DefaultInFlight,
		confirmTimeout: DefaultConfirmTimeout,
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
// reconnected, re-declaration failures). The default discards them.
// Passwords never appear in what is logged.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithBackoff sets the wait between reconnect attempts: doubling from min up
// to max, jittered. The default is 100ms to 10s.
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

// WithConfirmTimeout bounds the wait for one confirm; past it Publish
// returns transport.ErrUnconfirmed. The default is DefaultConfirmTimeout.
func WithConfirmTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.confirmTimeout = d
		}
	})
}
