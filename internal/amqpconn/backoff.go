package amqpconn

import (
	"math/rand/v2"
	"time"
)

// Backoff spaces reconnect attempts: exponential from Min, capped at Max,
// with full jitter in the upper half so that a fleet of clients does not
// reconnect in step after a broker restart.
type Backoff struct {
	Min time.Duration
	Max time.Duration
}

// DefaultBackoff is used when no backoff is configured.
var DefaultBackoff = Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}

// Delay is the wait before attempt n (0-based).
func (b Backoff) Delay(n int) time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = DefaultBackoff.Min
	}
	if hi < lo {
		hi = lo
	}
	d := lo
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	if d > hi {
		d = hi
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}
