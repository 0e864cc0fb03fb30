package engine

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// Config is one Run's settings, resolved by the root package from its
// Server: the engine reads nothing of the Server itself.
type Config struct {
	Transport transport.Transport
	// Receive makes the message a handler sees for a delivery (the root's
	// *acemq.Message) and returns it with a pointer to its envelope, read
	// as Read reads it: the engine keeps both, and allocates nothing more.
	Receive func(d transport.Delivery, now func() time.Time) (msg any, env *wire.Envelope)
	// Serve calls the handler with a message Receive made.
	Serve func(ctx context.Context, msg any) ack.Ack
	// BeforeDeadLetter runs what the handler of msg asked to run before
	// its dead letter is published (the root's Message.BeforeDeadLetter),
	// with the dead letter's reason (x-acemq-error), and returns the
	// headers to set on it; nil when nothing was asked
	// (deadletterhook.go).
	BeforeDeadLetter func(ctx context.Context, msg any, reason string) (map[string]any, error)

	Logger         *zap.Logger // never nil: the root caps it (internal/logging)
	Clock          transport.Clock
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator

	PublishTimeout  time.Duration
	ShutdownTimeout time.Duration
	HandlerTimeout  time.Duration // <= 0: none
	// WaitBound bounds a redelivery's wait for the handler of its message
	// where no handler timeout bounds it (the root's DefaultHandlerTimeout).
	WaitBound time.Duration
	// RedeliverEvery is how often due messages whose queue was missing are
	// sent round again.
	RedeliverEvery time.Duration
	// Ready is called once every queue is consumed.
	Ready func()
	// Throttles are the named throttles queues share (Queue.Throttles).
	Throttles map[string]Throttle
}

// Queue is one served queue's settings, resolved by the root: what the
// engine reads for the rest of the run and never changes.
type Queue struct {
	Name        string
	Policy      retry.Policy
	Concurrency int
	Prefetch    int
	Declare     bool // declare its topology and publish to rungs
	Args        map[string]any
	// Topology is what declaring the queue declares (acemq.Topology), and
	// Subscriptions its bindings to exchanges, declared with it.
	Topology      transport.Topology
	Subscriptions transport.Topology
	Strict        bool // a delivery limit below the attempts stops Run
	DeadLetter    string
	Parked        string
	Throttles     []string // names in Config.Throttles
	// Breaker, when set, is the settings of the queue's circuit breaker.
	Breaker *flow.BreakerSettings
}
