package amqpconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/internal/backoff"
	"github.com/acemq/acemq/internal/logging"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap"
)

// ErrClosed is returned by a Conn's methods after Close.
var ErrClosed = errors.New("amqpconn: closed")

// closeTimeout bounds the connection.close handshake: a blocked connection
// is not read by the broker and would otherwise never answer.
const closeTimeout = 5 * time.Second

// DefaultHealthyAfter is how long a connection must live to count as
// healthy when Config.HealthyAfter is zero.
const DefaultHealthyAfter = 5 * time.Second

// refusalLogEvery bounds how often a streak of refusals is logged again
// after its first line: a reconnect every Backoff.Max would otherwise log a
// line per try for as long as a connection limit lasts.
const refusalLogEvery = 30 * time.Second

// Config tells Open what to connect to and how.
type Config struct {
	// URLs are the broker nodes, tried in order; a reconnect starts with the
	// node after the one that was lost.
	URLs []string
	// Name is the connection_name client property shown by the broker.
	Name string
	// TLS is used for amqps:// URLs; nil means the defaults for the host.
	TLS *tls.Config
	// Heartbeat is the AMQP heartbeat; zero takes amqp091-go's default.
	Heartbeat time.Duration
	// DialTimeout bounds the TCP, TLS and AMQP handshakes of one attempt.
	DialTimeout time.Duration
	// Backoff spaces the reconnect attempts.
	Backoff Backoff
	// Logger receives connection events; nil means logging.Or's default.
	Logger *zap.Logger
	// OnConnect runs after every reconnect, before the connection is handed
	// out (transport/amqp re-declares topology there). Its context ends at
	// Close.
	OnConnect func(ctx context.Context, c *amqp.Connection)
	// HealthyAfter is how long a connection must live to count as healthy;
	// zero means DefaultHealthyAfter. A connection that dies sooner, twice
	// or more in a row, starts its reconnect one doubling further up
	// Backoff each time (up to Backoff.Max): a connection the client
	// itself kills on every open (a delivery amqp091-go cannot read, at the
	// head of a queue it consumes) would otherwise be redialled every
	// Backoff.Min for ever.
	HealthyAfter time.Duration
}

// Conn is one supervised AMQP connection. Its methods are safe for
// concurrent use.
type Conn struct {
	cfg Config
	log *zap.Logger

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	done   chan struct{} // closed when the supervisor has ended

	mu     sync.Mutex
	cur    *amqp.Connection // nil while reconnecting
	ready  chan struct{}    // closed once cur is set
	lost   chan struct{}    // closed once cur is known to be dead
	next   int              // index of the next URL to dial
	closed bool

	since   time.Time     // when cur was installed; guarded by mu
	refusal *amqp.Error   // the broker refused the latest reconnect attempt for good; guarded by mu
	refused chan struct{} // closed once refusal is set; guarded by mu

	// The streak of reconnect attempts the broker refused for now
	// (Classify's Transient), and who is told of it; guarded by mu.
	streak    *RefusedError
	loggedAt  time.Time // when the streak was last logged
	listeners map[int]func(*RefusedError)
	nextID    int

	blocked atomic.Pointer[string] // the broker's reason while blocked
	gen     atomic.Uint64
	opens   sync.WaitGroup // channel.open calls a ctx gave up on, still running
}

// Open dials cfg.URLs in order until one answers and starts supervising the
// connection. It fails when every URL failed once or ctx ended.
func Open(ctx context.Context, cfg Config) (*Conn, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("amqpconn: no broker URL")
	}
	for _, u := range cfg.URLs {
		if err := CheckURL(u); err != nil {
			return nil, err // in words that quote none of it
		}
	}
	cfg.Logger = logging.Or(cfg.Logger)
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 30 * time.Second
	}
	if cfg.HealthyAfter <= 0 {
		cfg.HealthyAfter = DefaultHealthyAfter
	}
	c := &Conn{
		cfg:     cfg,
		log:     cfg.Logger.With(zap.String("connection", cfg.Name)),
		done:    make(chan struct{}),
		ready:   make(chan struct{}),
		lost:    make(chan struct{}),
		refused: make(chan struct{}),
	}
	var errs []error
	for i, u := range cfg.URLs {
		conn, err := c.dial(ctx, u)
		if err != nil {
			errs = append(errs, redactErr(err, u))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		c.next = (i + 1) % len(cfg.URLs)
		c.ctx, c.cancel = context.WithCancel(context.Background())
		c.install(conn)
		go c.supervise(conn)
		return c, nil
	}
	return nil, fmt.Errorf("connect %s: %w", cfg.Name, errors.Join(errs...))
}

// Connection returns the live connection, waiting while a reconnect is
// under way.
func (c *Conn) Connection(ctx context.Context) (*amqp.Connection, error) {
	return c.connection(ctx, false)
}

// connection is Connection; unlessRefused gives up on a reconnect the
// broker refused, with the refusal.
func (c *Conn) connection(ctx context.Context, unlessRefused bool) (*amqp.Connection, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		cur, wait, refusal, refused := c.cur, c.ready, c.refusal, c.refused
		if cur != nil {
			wait = c.lost
		}
		c.mu.Unlock()
		if cur != nil && !cur.IsClosed() {
			return cur, nil
		}
		if !unlessRefused {
			refused = nil
		} else if cur == nil && refusal != nil {
			return nil, fmt.Errorf("amqpconn: %s: the broker refused to reconnect: %w", c.cfg.Name, refusal)
		}
		select {
		case <-wait:
		case <-refused:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// ConnectionUnlessRefused is Connection, except that it gives up as soon
// as the broker refuses a reconnect attempt, as ChannelUnlessRefused does.
func (c *Conn) ConnectionUnlessRefused(ctx context.Context) (*amqp.Connection, error) {
	return c.connection(ctx, true)
}

// Channel opens a channel on the live connection, waiting out a reconnect.
func (c *Conn) Channel(ctx context.Context) (*amqp.Channel, error) {
	return c.channel(ctx, false)
}

// ChannelUnlessRefused is Channel, except that it gives up as soon as the
// broker refuses a reconnect attempt for good (Classify's Permanent: 530
// "vhost ... not found", the vhost deleted; 530 "access to vhost ...
// refused for user ...", the user's access withdrawn; 403, the
// credentials), returning an error that wraps the broker's *amqp.Error. A
// consumer uses it to end instead of waiting for a vhost that may never
// come back; Conn itself goes on redialling until Close.
//
// A refusal for now (Classify's Transient: a connection limit reached, a
// vhost down, a node not accepting connections) does not end the wait:
// those go away on their own, and Conn dials again with backoff, telling
// NotifyRefused's listeners of each one.
func (c *Conn) ChannelUnlessRefused(ctx context.Context) (*amqp.Channel, error) {
	return c.channel(ctx, true)
}

func (c *Conn) channel(ctx context.Context, unlessRefused bool) (*amqp.Channel, error) {
	for {
		conn, err := c.connection(ctx, unlessRefused)
		if err != nil {
			return nil, err
		}
		ch, err := c.openChannel(ctx, conn)
		if err == nil {
			return ch, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !conn.IsClosed() {
			return nil, err
		}
	}
}

// openChannel is conn.Channel with a context. amqp091-go's channel.open
// takes none, and a broker that has blocked the connection stops reading
// its socket: the open would wait until the alarm clears. When ctx ends
// first the open goes on in the background and a channel it yields late is
// closed; Close waits for it (closing the connection ends it).
func (c *Conn) openChannel(ctx context.Context, conn *amqp.Connection) (*amqp.Channel, error) {
	type opened struct {
		ch  *amqp.Channel
		err error
	}
	res := make(chan opened, 1)
	var mu sync.Mutex
	abandoned := false
	c.opens.Add(1)
	go func() {
		defer c.opens.Done()
		ch, err := conn.Channel()
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			if ch != nil {
				ch.Close()
			}
			return
		}
		res <- opened{ch, err}
	}()
	select {
	case r := <-res:
		return r.ch, r.err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		select {
		case r := <-res: // it finished as ctx ended
			return r.ch, r.err
		default:
			abandoned = true
			return nil, ctx.Err()
		}
	}
}

// Blocked reports whether the broker has blocked the connection (a memory
// or disk alarm) and why.
func (c *Conn) Blocked() (reason string, blocked bool) {
	if r := c.blocked.Load(); r != nil {
		return *r, true
	}
	return "", false
}

// Check says whether the connection can work now: nil when it is open
// and the broker does not block it; else what is wrong, in words that
// quote no URL.
func (c *Conn) Check() error {
	c.mu.Lock()
	cur, closed := c.cur, c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return errors.New("closed")
	case cur == nil || cur.IsClosed():
		if r := c.Refused(); r != nil {
			return fmt.Errorf("not connected: %w", r)
		}
		return errors.New("not connected: reconnecting")
	}
	if reason, blocked := c.Blocked(); blocked {
		return errors.New("blocked by the broker: " + reason)
	}
	return nil
}

// Generation counts the connections made so far, the first being 1.
func (c *Conn) Generation() uint64 { return c.gen.Load() }

// Close stops reconnecting, closes the connection and returns once the
// supervising goroutine has ended. It is idempotent.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.done
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	<-c.done
	c.endStreak(false)
	c.mu.Lock()
	cur := c.cur
	c.cur = nil
	c.mu.Unlock()
	defer c.opens.Wait()
	if cur == nil || cur.IsClosed() {
		return nil
	}
	if err := cur.CloseDeadline(time.Now().Add(closeTimeout)); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("amqpconn: close %s: %w", c.cfg.Name, &redactedError{msg: RedactError(err, c.cfg.URLs...), err: err})
	}
	return nil
}

// install runs the OnConnect hook and hands conn out.
func (c *Conn) install(conn *amqp.Connection) {
	if c.cfg.OnConnect != nil {
		c.cfg.OnConnect(c.ctx, conn)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cur = conn
	c.since = time.Now()
	c.lost = make(chan struct{})
	close(c.ready)
	if c.refusal != nil {
		c.refusal, c.refused = nil, make(chan struct{})
	}
	c.gen.Add(1)
}

// supervise watches conn and replaces it when it dies, until Close.
func (c *Conn) supervise(conn *amqp.Connection) {
	defer close(c.done)
	short := 0 // connections in a row that died before HealthyAfter
	for {
		reason := c.watch(conn)
		if reason == nil {
			return
		}
		c.mu.Lock()
		lived := time.Since(c.since)
		c.cur = nil
		close(c.lost)
		c.ready = make(chan struct{})
		c.mu.Unlock()
		c.blocked.Store(nil)
		if lived < c.cfg.HealthyAfter {
			short++
		} else {
			short = 0
		}
		c.log.Warn("acemq: connection lost, reconnecting", append(closeFields(reason, c.cfg.URLs),
			zap.Stringer("lived", lived), zap.Int("short_lived_in_a_row", short))...)
		// The first short life may be bad luck (connections closed by an
		// operator); from the second in a row each one doubles the wait.
		if conn = c.reconnect(max(short-1, 0)); conn == nil {
			return
		}
	}
}

// closeFields describes why a connection or channel closed, for a log
// line: the AMQP reply code and text, and whether the broker said it
// (server) or this client decided it (amqp091-go's reader refusing a
// frame reports 501 with server false).
func closeFields(reason error, urls []string) []zap.Field {
	var ae *amqp.Error
	if errors.As(reason, &ae) {
		return []zap.Field{
			zap.Int("code", ae.Code),
			zap.String("reason", RedactError(errors.New(ae.Reason), urls...)),
			zap.Bool("server", ae.Server),
		}
	}
	return []zap.Field{zap.String("reason", RedactError(reason, urls...))}
}

// watch returns why conn died, or nil when Close was called first.
func (c *Conn) watch(conn *amqp.Connection) error {
	closes := conn.NotifyClose(make(chan *amqp.Error, 1))
	blocks := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	for {
		select {
		case <-c.ctx.Done():
			return nil
		case b, ok := <-blocks:
			if !ok {
				blocks = nil
				continue
			}
			c.setBlocked(b)
		case e, ok := <-closes:
			if c.ctx.Err() != nil {
				return nil
			}
			if ok && e != nil {
				return e
			}
			return errors.New("connection closed")
		}
	}
}

func (c *Conn) setBlocked(b amqp.Blocking) {
	if !b.Active {
		c.blocked.Store(nil)
		c.log.Info("acemq: connection unblocked by the broker")
		return
	}
	reason := b.Reason
	c.blocked.Store(&reason)
	c.log.Warn("acemq: connection blocked by the broker", zap.String("reason", reason))
}

// reconnect dials the URLs round-robin with backoff until one answers,
// the first wait being Backoff's wait number from; nil means Close came
// first.
func (c *Conn) reconnect(from int) *amqp.Connection {
	for attempt := 0; ; attempt++ {
		wait := c.cfg.Backoff.Delay(from + attempt)
		if from > 0 && attempt == 0 {
			c.log.Warn("acemq: the connection died soon after opening again; reconnecting more slowly",
				zap.Stringer("healthy_after", c.cfg.HealthyAfter), zap.Stringer("wait", wait))
		}
		if backoff.Sleep(c.ctx, nil, wait, nil) != nil {
			return nil
		}
		u := c.cfg.URLs[c.next]
		c.next = (c.next + 1) % len(c.cfg.URLs)
		conn, err := c.dial(c.ctx, u)
		if err != nil {
			if c.noteRefusal(err, u) {
				continue // noted and logged at a bounded rate
			}
			c.log.Warn("acemq: reconnect failed", zap.String("url", Redact(u)),
				zap.Int("attempt", attempt+1), zap.String("error", RedactError(err, u)))
			continue
		}
		if c.ctx.Err() != nil {
			_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
			return nil
		}
		c.install(conn)
		c.log.Info("acemq: reconnected", zap.String("url", Redact(u)), zap.Int("attempts", attempt+1))
		c.endStreak(true)
		return conn
	}
}

// dial makes one connection attempt to u.
func (c *Conn) dial(ctx context.Context, u string) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	if c.cfg.Name != "" {
		props.SetClientConnectionName(c.cfg.Name)
	}
	cfg := amqp.Config{
		Properties: props,
		Heartbeat:  c.cfg.Heartbeat,
		Dial: func(network, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: c.cfg.DialTimeout}
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// Cleared by amqp091-go once the AMQP handshake is done.
			if err := conn.SetDeadline(time.Now().Add(c.cfg.DialTimeout)); err != nil {
				conn.Close()
				return nil, err
			}
			return conn, nil
		},
	}
	if c.cfg.TLS != nil {
		cfg.TLSClientConfig = c.cfg.TLS.Clone()
	}
	return amqp.DialConfig(u, cfg)
}
