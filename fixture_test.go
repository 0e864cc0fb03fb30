package acemq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// fixture is a server on a memory broker, with its metrics and logs.
type fixture struct {
	t      *testing.T
	broker *memory.Broker
	conn   *memory.Conn
	srv    *acemq.Server
	reader *sdkmetric.ManualReader
	logs   *observer.ObservedLogs
	runErr chan error
}

// start runs srv on a new memory broker, with a mux holding h for each
// queue, and stops it when the test ends.
func start(t *testing.T, srv *acemq.Server, handlers map[string]acemq.Handler) *fixture {
	t.Helper()
	broker := memory.New()
	return startOn(t, broker, srv, handlers)
}

func startOn(t *testing.T, broker *memory.Broker, srv *acemq.Server, handlers map[string]acemq.Handler) *fixture {
	t.Helper()
	meters, reader := metrictest.New(t)
	f := &fixture{t: t, broker: broker, conn: broker.Connect(), srv: srv, reader: reader, runErr: make(chan error, 1)}
	core, logs := observer.New(zap.DebugLevel)
	f.logs = logs
	if srv.Handler == nil {
		mux := acemq.NewMux()
		for q, h := range handlers {
			mux.Handle(q, h)
		}
		srv.Handler = mux
	}
	if srv.Transport == nil {
		srv.Transport = f.conn
	}
	srv.Logger = zap.New(core)
	srv.MeterProvider = meters
	go func() { f.runErr <- srv.Run(context.Background()) }()
	select {
	case <-srv.Ready(): // declared and subscribed every queue
	case err := <-f.runErr:
		t.Fatalf("Run: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the server did not subscribe in 60s")
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		select {
		case <-f.runErr:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after Shutdown")
		}
		f.conn.Close()
		broker.Close()
	})
	return f
}

// publish sends body to queue through a Publisher, as a service would.
func (f *fixture) publish(queue, body string, headers map[string]any) acemq.PublishResult {
	f.t.Helper()
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
	res, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: queue, Body: []byte(body), Headers: headers})
	if err != nil {
		f.t.Fatalf("publish to %s: %v", queue, err)
	}
	return res
}

// eventually waits, in real time, for cond: the server works on its own
// goroutines.
func (f *fixture) eventually(what string, cond func() bool) {
	f.t.Helper()
	polltest.Eventually(f.t, what, cond)
}

// eventuallyWithin is eventually with a wait of its own, for a condition
// that takes real time by design (a publish retried with backoff).
func (f *fixture) eventuallyWithin(wait time.Duration, what string, cond func() bool) {
	f.t.Helper()
	polltest.Within(f.t, wait, what, cond)
}

// advance waits until n goroutines sleep on the virtual clock, then moves
// it by d.
func (f *fixture) advance(n int, d time.Duration) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.broker.Clock().BlockUntil(ctx, n); err != nil {
		f.t.Fatalf("no %d waiters on the clock to advance %v: %v", n, d, err)
	}
	f.broker.Clock().Advance(d)
}

// only returns the single message in queue, failing otherwise.
func (f *fixture) only(queue string) transport.Delivery {
	f.t.Helper()
	f.eventually("a message in "+queue, func() bool { return f.broker.Depth(queue) > 0 })
	got := f.broker.Peek(queue)
	if len(got) != 1 {
		f.t.Fatalf("%s holds %d messages, want 1", queue, len(got))
	}
	return got[0]
}

// counterReaches waits until a counter reaches want, then checks it went
// no further: a settlement's metrics are recorded as its original is
// settled, which can come after its copy was confirmed and even handled.
func (f *fixture) counterReaches(name string, attrs map[string]string, want int64) {
	f.t.Helper()
	metrictest.CounterReaches(f.t, f.reader, name, attrs, want)
}

// counter sums a counter's points whose attributes include every pair in attrs.
func (f *fixture) counter(name string, attrs map[string]string) int64 {
	f.t.Helper()
	return metrictest.Sum(f.t, f.reader, name, attrs)
}

// stop shuts the server down with the given deadline and returns Run's and
// Shutdown's errors.
func (f *fixture) stop(timeout time.Duration) (shutdownErr, runErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	shutdownErr = f.srv.Shutdown(ctx)
	select {
	case runErr = <-f.runErr:
		f.runErr <- runErr // for the cleanup
	case <-time.After(30 * time.Second):
		f.t.Fatal("Run did not return within 30s of Shutdown")
	}
	return shutdownErr, runErr
}

var errBoom = errors.New("the warehouse is not answering")

// bare returns a memory broker and a connection to it, closed when the test
// ends, for tests that run a Server themselves.
func bare(t *testing.T) (*memory.Broker, *memory.Conn) {
	t.Helper()
	broker := memory.New()
	conn := broker.Connect()
	t.Cleanup(func() { conn.Close(); broker.Close() })
	return broker, conn
}

// acceptMux is a mux that accepts everything on queue.
func acceptMux(queue string) *acemq.Mux {
	mux := acemq.NewMux()
	mux.HandleFunc(queue, accept)
	return mux
}
