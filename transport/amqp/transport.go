package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
)

// Transport is a transport.Transport on RabbitMQ. It holds a connection to
// declare, inspect and get (and, with WithConnectionPerConsumer(false), to
// consume), one to publish, and one per subscription, and reconnects each
// on its own. Every method is safe for concurrent use.
type Transport struct {
	cfg     config
	log     *zap.Logger
	connCfg amqpconn.Config // what every connection is dialled with
	consume *amqpconn.Conn
	publish *amqpconn.Conn
	pub     *publisher
	topo    topologies
	get     *getter
	inspect inspectors

	mu         sync.Mutex
	closed     bool
	subs       map[*subscription]struct{} // until their Close
	unreadable map[string]int             // see Unreadable
	wg         sync.WaitGroup             // goroutines started for subscriptions
}

var _ transport.Transport = (*Transport)(nil)

// Dial connects to the broker at url (amqp:// or amqps://) and returns a
// Transport that stays connected until Close. It fails when no node of the
// cluster answered or ctx ended first; the error never shows a password.
// A URL that does not parse, this one or one of WithURLs, fails it at once
// without a dial: a reconnect would only fail on it later. The error then
// says what is wrong in words that quote nothing of the URL.
func Dial(ctx context.Context, url string, opts ...Option) (*Transport, error) {
	cfg := defaultConfig(url)
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	for i, u := range cfg.urls {
		if err := amqpconn.CheckURL(u); err != nil {
			if len(cfg.urls) > 1 {
				return nil, fmt.Errorf("acemq: dial: URL %d of %d: %w", i+1, len(cfg.urls), err)
			}
			return nil, fmt.Errorf("acemq: dial: %w", err)
		}
	}
	t := &Transport{cfg: cfg, log: cfg.logger, subs: make(map[*subscription]struct{})}
	t.topo.log = cfg.logger
	base := amqpconn.Config{
		URLs:        cfg.urls,
		TLS:         cfg.tls,
		Heartbeat:   cfg.heartbeat,
		DialTimeout: cfg.dialTimeout,
		Backoff:     cfg.backoff,
		Logger:      cfg.logger,
	}
	t.connCfg = base
	cc := base
	cc.Name = cfg.name + " consume"
	cc.OnConnect = t.topo.redeclare
	consume, err := amqpconn.Open(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("acemq: dial: %w", err)
	}
	pc := base
	pc.Name = cfg.name + " publish"
	publish, err := amqpconn.Open(ctx, pc)
	if err != nil {
		_ = consume.Close()
		return nil, fmt.Errorf("acemq: dial: %w", err)
	}
	t.consume, t.publish = consume, publish
	t.get = newGetter(consume)
	t.pub = newPublisher(publish, cfg)
	return t, nil
}

// Declare applies top in order (exchanges, queues, bindings) on a channel of
// its own and remembers it: after a reconnect every topology declared so
// far is declared again, in order, before consuming resumes.
func (t *Transport) Declare(ctx context.Context, top transport.Topology) error {
	if t.isClosed() {
		return transport.ErrClosed
	}
	if len(t.cfg.urls) > 1 {
		var err error
		if top, err = t.declareAtHome(ctx, top); err != nil { // home.go
			return err
		}
	}
	return t.topo.declare(ctx, t.consume, top)
}

var _ transport.QueueDeleter = (*Transport)(nil)

// Nodes is the number of broker URLs the transport was given: its first
// and those of WithURLs.
func (t *Transport) Nodes() int { return len(t.cfg.urls) }

var _ transport.Clustered = (*Transport)(nil)

// BrokerVersion returns the product and version the broker announced when
// the connection opened ("RabbitMQ", "3.10.8").
func (t *Transport) BrokerVersion(ctx context.Context) (product, version string, err error) {
	if t.isClosed() {
		return "", "", transport.ErrClosed
	}
	conn, err := t.consume.Connection(ctx)
	if err != nil {
		return "", "", fmt.Errorf("acemq: broker version: %w", classify(err))
	}
	product, _ = conn.Properties["product"].(string)
	version, _ = conn.Properties["version"].(string)
	return product, version, nil
}

var _ transport.Versioned = (*Transport)(nil)

// Check says whether the transport can work now: both of its shared
// connections open and not blocked by the broker, and the broker
// answering publishes (not stalled: WithStallAfter). (A queue that consumes
// on a connection of its own is checked by the server's own readiness.)
func (t *Transport) Check() error {
	if t.isClosed() {
		return transport.ErrClosed
	}
	if err := t.consume.Check(); err != nil {
		return fmt.Errorf("acemq: consume connection: %w", err)
	}
	if err := t.publish.Check(); err != nil {
		return fmt.Errorf("acemq: publish connection: %w", err)
	}
	if err := t.pub.stall.err(time.Now()); err != nil {
		return fmt.Errorf("acemq: publish connection: %w", err)
	}
	return nil
}

var _ transport.Checker = (*Transport)(nil)

// Publish sends p on a confirm-mode channel and waits for the broker's
// confirm. See transport.Transport for the outcomes. Routed is false only
// for a mandatory publish that reached no queue: without Mandatory the
// broker drops an unroutable message and says nothing. A publish to a
// missing exchange is transport.ErrNotFound. While the broker blocks the
// publish connection (a resource alarm) Publish fails at once with
// transport.ErrBlocked. A publish that began before the block can be stuck
// writing to the socket, which no ctx interrupts, until the alarm clears or
// the connection closes.
//
// A basic.return is matched to its publish by the message's x-acemq-id, or,
// when that cannot tell it from another publish in flight, by the header
// x-acemq-publish-seq, which the transport then adds; deliveries never
// show it.
func (t *Transport) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	if t.isClosed() {
		return transport.Confirmation{}, transport.ErrClosed
	}
	return t.pub.publish(ctx, &p)
}

// Get takes one message with basic.get, without auto-ack. It settles on a
// channel shared by every Get; a Get refused by the broker (a missing queue)
// closes that channel, making earlier unsettled Get deliveries stale (the
// broker requeues them).
func (t *Transport) Get(ctx context.Context, queue string) (transport.Delivery, bool, error) {
	if t.isClosed() {
		return transport.Delivery{}, false, transport.ErrClosed
	}
	return t.get.get(ctx, queue)
}

// Close cancels every subscription, closes every connection (the broker
// requeues unsettled deliveries) and returns once every goroutine the
// Transport started has ended. It is idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	subs := make([]*subscription, 0, len(t.subs))
	for s := range t.subs {
		subs = append(subs, s)
	}
	t.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		s.cancelled = true // asked: the subscription's Err stays nil
		s.mu.Unlock()
		s.halt()
	}
	for _, s := range subs {
		<-s.done
		s.release(true) // its acks before its connection goes, or they are redelivered
	}
	t.pub.close()
	t.inspect.close()
	errs := []error{t.consume.Close(), t.publish.Close()}
	t.pub.waitRetired()
	t.wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("acemq: close: %w", err)
	}
	return nil
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// track registers a subscription so that Close can stop it; false means the
// transport is closed.
func (t *Transport) track(s *subscription) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.subs[s] = struct{}{}
	t.wg.Add(1)
	return true
}

func (t *Transport) untrack(s *subscription) {
	t.mu.Lock()
	delete(t.subs, s)
	t.mu.Unlock()
}

// closeChannel closes ch unless the broker or a connection loss already did.
func closeChannel(ch *amqp.Channel) {
	if ch != nil && !ch.IsClosed() {
		_ = ch.Close()
	}
}
