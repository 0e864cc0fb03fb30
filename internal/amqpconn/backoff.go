package amqpconn

import (
	"time"

	"github.com/acemq/acemq/internal/backoff"
)

// Backoff spaces reconnect attempts. It is a [backoff.Policy], which callers
// give Jitter so that a fleet of clients does not reconnect in step after a
// broker restart.
type Backoff = backoff.Policy

// DefaultBackoff is used when no backoff is configured.
var DefaultBackoff = Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: true}
