package memory

import (
	"sync"
	"sync/atomic"

	"github.com/acemq/acemq/transport"
)

// Broker is an in-process RabbitMQ: exchanges, queues, bindings and the
// messages in them, shared by every connection made with [Broker.Connect].
// Its methods other than Connect and Close are for tests, to look at and
// change the broker behind the code under test's back. All are safe for
// concurrent use.
type Broker struct {
	clock *Clock
	wg    sync.WaitGroup // real-clock expiry callbacks
	fault atomic.Pointer[func(transport.Publishing) Fault]
	ackBy consumerTimeout // WithConsumerTimeout: how long a delivery may stay unacked

	mu        sync.Mutex
	closed    bool
	exchanges map[string]*exchange
	queues    map[string]*queue
	conns     map[*Conn]struct{}
	seq       uint64 // message order, broker-wide
	tags      uint64 // generated consumer tags

	limit connLimit // SetConnectionLimit (connlimit.go)
	stall stall     // Stall (stall.go)

	acks   ackQueue        // Acks waiting for the lock's holder (acks.go)
	posted []*subscription // delivered to under the lock, sent as it is released (sendout.go)
}

// Option configures a Broker.
type Option interface{ apply(*Broker) }

type optionFunc func(*Broker)

func (f optionFunc) apply(b *Broker) { f(b) }

// WithClock makes the broker tell time by c, for instance a virtual clock
// ([NewClock]) started at an instant of the test's choosing, or one shared
// with other code under test. It takes the one clock type acemq tells time
// by everywhere (docs/internals.md, "Settings"), as the server's Clock and
// idempotency.WithClock do. A *Clock is used as it is. Any other
// transport.Clock is read and waited on through a *Clock that stands for
// it ([Broker.Clock] returns that one): the broker's message expiries and
// timeouts wait on c's After, a goroutine each until it fires or is
// stopped, and c, not the broker's clock, is what the test moves. A nil c
// keeps the default virtual clock.
func WithClock(c transport.Clock) Option {
	return optionFunc(func(b *Broker) {
		if mc, ok := c.(*Clock); ok {
			if mc != nil {
				b.clock = mc
			}
			return
		}
		if c != nil {
			b.clock = foreignClock(c)
		}
	})
}

// WithRealClock makes the broker tell wall time: TTLs expire on their own
// and Advance sleeps. For benchmarks and examples that run in real time;
// tests want the default virtual clock.
func WithRealClock() Option {
	return optionFunc(func(b *Broker) { b.clock = newRealClock() })
}

// New returns an empty broker with a virtual clock reading [Epoch]. Like
// RabbitMQ it has the default exchange and amq.direct, amq.fanout,
// amq.topic, amq.headers and amq.match. It starts no goroutine.
func New(opts ...Option) *Broker {
	b := &Broker{
		exchanges: make(map[string]*exchange),
		queues:    make(map[string]*queue),
		conns:     make(map[*Conn]struct{}),
	}
	for _, o := range opts {
		o.apply(b)
	}
	if b.clock == nil {
		b.clock = NewClock(Epoch)
	}
	for name, kind := range map[string]string{
		"amq.direct": kindDirect, "amq.fanout": kindFanout, "amq.topic": kindTopic,
		"amq.headers": kindHeaders, "amq.match": kindHeaders,
	} {
		b.exchanges[name] = newExchange(name, kind, true)
	}
	return b
}

// Clock returns the broker's clock: advance it to expire messages and wake
// code waiting on it.
func (b *Broker) Clock() *Clock { return b.clock }

// Connect opens a connection to the broker: a [transport.Transport] of its
// own, whose Close gives back only its own unsettled deliveries. Two
// servers on two connections compete for one queue as on RabbitMQ. After
// the broker closed, the connection's methods return ErrClosed.
func (b *Broker) Connect() *Conn {
	c := &Conn{b: b, gets: holder{}}
	b.lock()
	defer b.unlock()
	if b.closed {
		c.closed = true
		return c
	}
	b.conns[c] = struct{}{}
	return c
}

// Close closes every connection, which gives their unsettled deliveries
// back, and stops the broker's timers; it returns once no callback of a
// real clock is running. The queues stay readable through the inspection
// methods. With a virtual clock nothing needs closing: the broker starts
// no goroutine. Close is idempotent.
func (b *Broker) Close() error {
	b.lock()
	if b.closed {
		b.unlock()
		return nil
	}
	b.closed = true
	for c := range b.conns {
		b.closeConn(c)
	}
	for _, q := range b.queues {
		b.stopTimer(q)
	}
	b.unlock()
	b.wg.Wait()
	return nil
}

func (b *Broker) nextSeq() uint64 {
	b.seq++
	return b.seq
}
