package engine

import (
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/acemq/acemq/transport"
)

// lease is one subscription of a consumer and the deliveries taken from
// it and not yet ended. A subscription the consumer no longer consumes on
// (its breaker switched it, the broker ended it) is retired: it is closed
// once the last of them ends, not before, since closing it would give
// back the originals of copies still waiting here (an in-process retry, a
// refused copy held), and their acks would then fail and the broker
// deliver them again; and not never, since a channel a trip leaves open
// would stay open as long as the process.
type lease struct {
	sub     transport.Subscription
	out     atomic.Int64 // deliveries taken and not ended
	retired atomic.Bool
	once    sync.Once
	closed  atomic.Bool
	onClose func(error)
}

func newLease(sub transport.Subscription, onClose func(error)) *lease {
	return &lease{sub: sub, onClose: onClose}
}

// take counts a delivery taken from the subscription. A nil lease (a
// test's consumer) counts nothing.
func (l *lease) take() {
	if l != nil {
		l.out.Add(1)
	}
}

// done counts a delivery ended (acked, given back, rejected, dropped).
func (l *lease) done() {
	if l != nil && l.out.Add(-1) == 0 && l.retired.Load() {
		l.close()
	}
}

// retire says the consumer consumes on it no more: it closes as soon as
// nothing taken from it is left.
func (l *lease) retire() {
	l.retired.Store(true)
	if l.out.Load() == 0 {
		l.close()
	}
}

func (l *lease) isClosed() bool { return l.closed.Load() }

func (l *lease) close() {
	l.once.Do(func() {
		l.closed.Store(true)
		if err := l.sub.Close(); err != nil && l.onClose != nil {
			l.onClose(err)
		}
	})
}

// leaseLog is what a lease's close failing logs.
func (c *consumer) leaseLog(err error) {
	c.e.log.Debug("acemq: close a retired subscription", zap.String("queue", c.q.name), zap.Error(err))
}
