package acemqtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/transport/memory"
)

// Server is an [acemq.Server] running on an in-process memory broker with
// a virtual clock, for one test: what httptest.Server is to an
// http.Handler. [NewServer] returns it subscribed to every queue, and the
// test's cleanup shuts it down.
type Server struct {
	// Server is the server under test, as the test configured it, with
	// Transport and Clock filled in. Ask it what a running server knows
	// (CheckReady); leave stopping it to the cleanup.
	Server *acemq.Server
	// Broker is the memory broker the server runs on: look at its queues
	// (Depth, Peek, Queue), break them (DeleteQueue, Unbind), or make its
	// publishes fail (SetPublishFault with memory.FaultNext or
	// memory.FaultEvery). Its Clock is the server's.
	Broker *memory.Broker
	// Conn is the server's connection to Broker, a transport.Transport:
	// publish through it (an acemq.Publisher) what Publish does not cover.
	Conn *memory.Conn

	done chan struct{} // closed when Run returned
	err  error         // what Run returned, once done is closed
}

// Option configures NewServer.
type Option interface{ apply(*config) }

type config struct {
	broker []memory.Option
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithBroker makes the server's broker with these options: a consumer
// timeout (memory.WithConsumerTimeout), or a virtual clock started at an
// instant of the test's choosing (memory.WithClock). A real clock
// (memory.WithRealClock) defeats the point: the clock helpers need a
// virtual one.
func WithBroker(opts ...memory.Option) Option {
	return optionFunc(func(c *config) { c.broker = append(c.broker, opts...) })
}

// wait bounds every real-time wait of this package: for the server to
// subscribe, to go quiet (see RunUntilIdle), to stop.
const wait = 10 * time.Second

// NewServer runs srv (nil for a zero acemq.Server) with handler h on a new
// memory broker and returns once Run has declared the topology and
// subscribed every queue of h (srv.Ready), so that a test publishes only
// to a server that is listening. srv keeps the settings the test gave it
// (Retry, Queues, Concurrency, ...); its Transport and Clock must be nil,
// and its Handler nil or h. Without a Logger of its own, its warnings and
// errors go to the test's log.
//
// The test's cleanup shuts the server down, by srv.ShutdownTimeout or
// within 10 s, and fails the test if Run returned an error other than
// acemq.ErrServerClosed: a test that leaves a handler blocked fails with
// acemq.ErrCutOff.
func NewServer(tb testing.TB, h acemq.Handler, srv *acemq.Server, opts ...Option) *Server {
	tb.Helper()
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	if srv == nil {
		srv = &acemq.Server{}
	}
	switch {
	case h == nil && srv.Handler == nil:
		tb.Fatal("acemqtest: NewServer: no handler")
	case h != nil && srv.Handler != nil:
		tb.Fatal("acemqtest: NewServer: the handler is given twice, as h and as srv.Handler; give it once")
	case srv.Transport != nil:
		tb.Fatal("acemqtest: NewServer: srv.Transport is set; leave it nil: the server runs on the test's memory broker")
	}
	if h != nil {
		srv.Handler = h
	}
	b := memory.New(cfg.broker...)
	if srv.Clock == nil {
		srv.Clock = b.Clock()
	} else if c, ok := srv.Clock.(*memory.Clock); !ok || c != b.Clock() {
		b.Close()
		tb.Fatal("acemqtest: NewServer: srv.Clock is set; leave it nil: the server tells time by the broker's virtual clock (memory.WithClock through WithBroker sets it)")
	}
	s := &Server{Server: srv, Broker: b, Conn: b.Connect(), done: make(chan struct{})}
	srv.Transport = s.Conn
	if srv.Logger == nil {
		var log *testLog
		srv.Logger, log = newTestLog(tb)
		tb.Cleanup(log.end) // after stop: cleanups run last registered first
	}
	go func() {
		defer close(s.done)
		s.err = srv.Run(context.Background())
	}()
	tb.Cleanup(func() { s.stop(tb) })
	select {
	case <-srv.Ready():
	case <-s.done:
		tb.Fatalf("acemqtest: NewServer: Run returned before it subscribed: %v", s.err)
	case <-time.After(wait):
		tb.Fatalf("acemqtest: NewServer: Run did not subscribe every queue within %v", wait)
	}
	return s
}

// stop shuts the server down, closes the broker, and fails tb if Run
// failed.
func (s *Server) stop(tb testing.TB) {
	tb.Helper()
	grace := s.Server.ShutdownTimeout
	if grace <= 0 {
		grace = wait
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = s.Server.Shutdown(ctx) // Run's error says the same
	select {
	case <-s.done:
		if s.err != nil && !errors.Is(s.err, acemq.ErrServerClosed) {
			tb.Errorf("acemqtest: Run: %v", s.err)
		}
	case <-time.After(wait):
		tb.Errorf("acemqtest: Run did not return within %v of Shutdown's deadline", wait)
	}
	s.Conn.Close()
	s.Broker.Close()
}

// stopped fails tb if Run has returned: nothing the test waits for can
// happen then.
func (s *Server) stopped(tb testing.TB) {
	tb.Helper()
	select {
	case <-s.done:
		tb.Fatalf("acemqtest: the server stopped: Run returned %v", s.err)
	default:
	}
}

// Publish publishes v to the queue named key, as a service's
// acemq.Publisher would (confirmed, mandatory: a message that reaches no
// queue fails the test), and returns what the broker said. v is encoded
// with codec.JSON, or the codec WithCodec gives, and the content type set
// from it; a []byte is published as it is, with none, for bodies a codec
// would not write (a foreign producer's, a broken one). The publish
// returns once the broker took the message: run the clock
// ([Server.RunUntilIdle]) to have the server handle it.
func (s *Server) Publish(tb testing.TB, key string, v any, opts ...PublishOption) acemq.PublishResult {
	tb.Helper()
	p := publishing{codec: codec.JSON, o: acemq.Outgoing{RoutingKey: key}}
	for _, o := range opts {
		o.applyPublish(&p)
	}
	if body, ok := v.([]byte); ok {
		p.o.Body = body
	} else {
		body, err := p.codec.Marshal(v)
		if err != nil {
			tb.Fatalf("acemqtest: Publish to %s: %v", key, err)
		}
		p.o.Body, p.o.ContentType = body, p.codec.ContentType()
	}
	pub := &acemq.Publisher{Transport: s.Conn, Mandatory: true}
	res, err := pub.Publish(context.Background(), p.o)
	if err != nil {
		tb.Fatalf("acemqtest: Publish: %v", err)
	}
	return res
}

// PublishOption configures one Publish.
type PublishOption interface{ applyPublish(*publishing) }

type publishing struct {
	codec codec.Codec
	o     acemq.Outgoing
}

type publishFunc func(*publishing)

func (f publishFunc) applyPublish(p *publishing) { f(p) }

// WithCodec encodes the value with c instead of codec.JSON, and sets c's
// content type.
func WithCodec(c codec.Codec) PublishOption { return publishFunc(func(p *publishing) { p.codec = c }) }

// WithHeaders publishes these headers besides the ones the wire contract
// stamps (which they cannot override: every published message is attempt
// 1, created now).
func WithHeaders(h map[string]any) PublishOption {
	return publishFunc(func(p *publishing) { p.o.Headers = h })
}

// WithID sets x-acemq-id, for a test of what the same business event
// published twice does (the idempotency middleware).
func WithID(id string) PublishOption { return publishFunc(func(p *publishing) { p.o.ID = id }) }

// WithDelay schedules the message: it waits d on the delay queues, and the
// server gets it once the clock has moved that far.
func WithDelay(d time.Duration) PublishOption {
	return publishFunc(func(p *publishing) { p.o.Delay = d })
}

// WithAt schedules the message for an instant on the virtual clock
// (Broker.Clock().Now() plus a wait, or memory.Epoch plus one).
func WithAt(t time.Time) PublishOption { return publishFunc(func(p *publishing) { p.o.At = t }) }

// WithExchange publishes through exchange instead of the default one, key
// being the routing key: for a test of pub/sub bindings.
func WithExchange(exchange string) PublishOption {
	return publishFunc(func(p *publishing) { p.o.Exchange = exchange })
}
