package acemq

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// Defaults of a Server's settings.
const (
	DefaultConcurrency     = 4
	DefaultPrefetch        = 32
	DefaultShutdownTimeout = 20 * time.Second
	DefaultPublishTimeout  = 30 * time.Second
	// DefaultHandlerTimeout is below RabbitMQ's default consumer_timeout
	// of 30 minutes.
	DefaultHandlerTimeout = 25 * time.Minute
	// RedeliverEvery is how often a server that uses the delay queues
	// sends the due messages whose destination was missing (in
	// acemq.delay.v1.undeliverable) round again: a destination that comes
	// back gets them within this long.
	RedeliverEvery = 10 * time.Second
	// DelayCheckEvery is how often a server that uses the delay queues checks
	// that every queue and exchange of their layout exists (about 60 passive
	// declares), and declares what is missing where it may; a delayed copy
	// refused by a missing level has it checked at once. Nothing else would
	// notice a deleted level exchange: the level above keeps what it
	// dead-letters into it, neither ready nor unacked (a quorum queue's
	// messages_dlx, which no passive declare counts), until the exchange is
	// back, and RabbitMQ offers those again only about every 3 minutes
	// (dead_letter_worker_publisher_confirm_timeout). The check runs in the
	// loop of RedeliverEvery, every third pass, on the wall clock for the
	// reason that loop does: an operator deletes an exchange in real time,
	// also under a memory broker whose virtual clock stands still.
	DelayCheckEvery = 3 * RedeliverEvery
)

var (
	// ErrServerClosed is returned by Run called after Shutdown or Close.
	ErrServerClosed = errors.New("acemq: server closed")
	// ErrCutOff says the shutdown deadline cut at least one handler off. Its
	// message was given back to the broker, which redelivers it.
	ErrCutOff = engine.ErrCutOff
	// ErrMissingTopology is what Run returns when declaration is off (or
	// not permitted) and a queue, exchange or the delay queues the server
	// needs do not exist. The error names what is missing and the command
	// that declares it.
	ErrMissingTopology = engine.ErrMissingTopology
	// ErrNeedsID is what a handler or middleware retries with when the
	// message has no id of its own (Message.IDIsNew) and it needs one that
	// every delivery shares, as idempotency does. The server publishes the
	// message again at once to its own queue, with the id stamped on and
	// the attempt unchanged, and acknowledges the original once the copy
	// is confirmed: one extra publish, only for such messages. The copy
	// goes to the back of the queue. The id is never derived from the
	// content, since two distinct messages with the same body would then
	// be one.
	ErrNeedsID = engine.ErrNeedsID
	// ErrNoQueues is returned by Run when the handler names no queue.
	ErrNoQueues = errors.New("acemq: the server's handler names no queues (register handlers with Mux.Handle, or give a Handler with a Queues() []string method)")
)

// QueueConfig is one queue's settings. A zero field takes the server's.
type QueueConfig struct {
	// Retry replaces the server's policy for this queue; it does not merge
	// with it. retry.None() is an explicit "no retry" here.
	Retry retry.Policy
	// Concurrency is how many handlers run at once on this queue.
	Concurrency int
	// Prefetch bounds unsettled deliveries, in-process retry waits included.
	// A subscription starts on probation at 1 and takes redelivered
	// messages one at a time, so that a poison that takes the process down
	// spends only its own delivery budget; the first fresh delivery opens
	// the rest of the prefetch.
	Prefetch int
	// NoDeclare declares nothing for this queue and publishes to no rung:
	// for a user without configure permission. Pair it with a policy whose
	// broker-wait threshold is zero.
	NoDeclare bool
	// Args are the queue's own declaration arguments, for example
	// {"x-queue-type": "quorum"}.
	Args map[string]any
	// Partitions, above zero, spreads the queue over that many queues,
	// Q.p0 to Q.p{Partitions-1} (see Partitioned), each declared and
	// consumed as a queue of its own with these settings (Concurrency and
	// Prefetch are per partition, its rungs, .dlq and .parked its own),
	// all served by the handler registered for Q. Publishers send to
	// Partitioned{Queue: Q, Count: Partitions}.For(key). Every server and
	// publisher of Q must agree on the count.
	Partitions int
	// Ordered keeps the order messages arrive in (per partition, so per
	// key, on a partitioned queue): the queue is declared with
	// x-single-active-consumer, so that one consumer among all the
	// servers' takes its messages at a time and the next takes over when
	// it goes, and its handler runs one message at a time (Concurrency
	// must be 0 or 1). It needs a quorum queue (Args x-queue-type quorum):
	// RabbitMQ 3.10's classic single-active-consumer queues crash when the
	// active consumer cancels holding deliveries, as a drain does. On
	// RabbitMQ the active consumer takes one delivery at a time (the
	// probation's second consumer registers behind the others and waits),
	// whatever Prefetch says. A retry, a delay or a consumer's death reorder:
	// docs/operators.md says how. Turning it on for an existing queue is
	// refused by the broker (inequivalent arg x-single-active-consumer):
	// the queue must be declared again.
	Ordered bool
	// Bindings subscribe the queue to exchanges (publish and subscribe):
	// declared, with the exchanges, as part of the queue's topology.
	Bindings []Binding
	// DeliveryLimit, above zero, declares the queue with the broker's own
	// limit on how often one message is delivered (x-delivery-limit), and
	// the route a message past it takes: into Q.dlq through acemq.dlx, at
	// least once (x-dead-letter-strategy at-least-once, x-overflow
	// reject-publish). The queue must be a quorum queue (Args
	// x-queue-type quorum). Retries are republished copies, each counted
	// afresh, so the limit bounds the redeliveries of one attempt: a
	// handler that crashes the process, shutdowns that give messages back,
	// the broker's consumer_timeout. RabbitMQ 4 gives every quorum queue a
	// limit of 20 unless set; without a route, a message past it is
	// dropped. A limit in Args without x-dead-letter-exchange is refused
	// at start-up: never half a declaration.
	DeliveryLimit int
	// StrictDeliveryLimit makes a delivery limit below the retry policy's
	// attempts an error at start-up instead of a warning.
	StrictDeliveryLimit bool
	// Throttles names the throttles (Server.Throttles) this queue's
	// handlers are under, shared with every other queue that names them.
	Throttles []string
	// Breaker, when set, stops consuming this queue while its handlers'
	// failures say a dependency is down (see Breaker); it replaces the
	// server's.
	Breaker *Breaker
}

// Server consumes every queue its Handler names and settles what the handler
// returns: accept, retry on the ladder, dead-letter or park. Set its fields
// before Run and do not change them after.
type Server struct {
	Transport transport.Transport
	// Handler is usually a *Mux; its queues are the ones consumed.
	Handler Handler
	// Retry is the default policy. The zero value is one delivery: a retry
	// asked for without a policy is dead-lettered with a reason saying so.
	Retry retry.Policy
	// Queues holds per-queue settings, by queue name. Every key must be a
	// queue the handler serves: Run refuses a key that names no such queue
	// (a typo would otherwise leave the real queue without its settings).
	Queues map[string]QueueConfig
	// Breaker is every queue's breaker, each queue with one of its own,
	// unless its QueueConfig sets one; nil: none.
	Breaker *Breaker
	// Throttles are the named throttles queues share: a queue is under the
	// ones its QueueConfig.Throttles names. Run refuses a name no queue
	// could mean and a throttle that throttles nothing.
	Throttles map[string]Throttle
	// Concurrency and Prefetch are the per-queue defaults (4 and 32).
	Concurrency int
	Prefetch    int
	// NoDeclare turns declaration off for every queue.
	NoDeclare bool
	// ShutdownTimeout bounds the wait for running handlers when Run's context
	// ends or Shutdown's context has no deadline. Default 20 s.
	ShutdownTimeout time.Duration
	// HandlerTimeout ends each handler's context once it has run this long:
	// a message redelivered after its handler ran past it is dead-lettered
	// with a reason naming it (consumer_timeout), not run again. Default 25
	// minutes; negative means none.
	//
	// The broker's consumer_timeout (RabbitMQ: 30 minutes by default, often
	// 5 to 15) is learnt, not guessed: from a queue's x-consumer-timeout
	// argument at start-up (warned of when HandlerTimeout is above it), and
	// from the broker itself the first time it closes a consumer's channel
	// for it, as that close states the timeout it used. From then on the
	// queue's handlers end at a cap below the broker's timeout (a tenth
	// less, at least 5 s less), logged once, HandlerTimeout or none; a
	// handler that had already run that long is overdue, and its
	// redelivery dead-lettered. Set it lower by hand only to cap handlers
	// before the broker has said.
	//
	// It counts wall time, as the broker's timeout does, also when the
	// server tells time by a virtual clock (Clock, the memory transport's):
	// a handler asleep on that clock for longer is not cut off, so a test
	// of the timeout path sleeps in real time.
	HandlerTimeout time.Duration
	// PublishTimeout bounds each retry, dead-letter or park publish; a confirm
	// that does not come in time is an unknown outcome and the original is
	// given back to the broker. Default 30 s. A refusal for good (access
	// withdrawn, the vhost gone) and the shutdown's deadline end the wait
	// sooner.
	PublishTimeout time.Duration
	// Logger is where the server logs; [FromSlog] makes one of a
	// *slog.Logger. Without one, warnings and errors (a message given up
	// on, a missing rung, a refused copy) go to slog.Default();
	// zap.NewNop() logs nothing.
	Logger *zap.Logger
	// MeterProvider is where the server's metrics go; nil is the global
	// one (otel.GetMeterProvider), a no-op until the program sets its own.
	MeterProvider metric.MeterProvider
	// TracerProvider is where the server's spans go: a process span per
	// delivery, around the handler and the settlement, and a producer
	// span per copy it publishes. Nil is the global one
	// (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context a delivery carries and writes the
	// process span's into every copy, so that all the attempts of a
	// message land in one trace. Nil is the global one
	// (otel.GetTextMapPropagator), or W3C trace context while that is
	// otel's default, which propagates nothing.
	Propagator propagation.TextMapPropagator
	// Clock defaults to the transport's own (the memory transport's virtual
	// clock), else the wall clock.
	Clock transport.Clock

	mu      sync.Mutex
	started bool
	closed  bool
	run     *engine.Engine // the Run under way, or the last one

	ready     chan struct{} // closed once Run has subscribed every queue; made by readyCh
	readyOnce sync.Once

	redeliverEvery time.Duration // RedeliverEvery unless a test sets it
}

// Run declares each queue's topology (unless declare is off), consumes every
// queue and handles messages until ctx ends or Shutdown or Close is called.
// It returns only when every goroutine it started has ended: nil after a
// clean stop, ErrCutOff when the deadline cut a handler off, or the error
// that stopped it (settings it refuses, a refused declaration, a transport
// that closed). After Shutdown or Close it returns ErrServerClosed.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return ErrServerClosed
	case s.started:
		s.mu.Unlock()
		return errors.New("acemq: Server.Run called twice")
	}
	s.started = true
	e := engine.New(s.engineConfig())
	s.run = e
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	}()
	return e.Run(ctx, s.queueRuns)
}

// Shutdown stops the server gracefully: it stops receiving, gives back the
// messages delivered but not started, republishes at once any message in an
// in-process retry wait (attempt raised, nothing lost), and waits for running
// handlers until ctx's deadline (ShutdownTimeout when ctx has none). Handlers
// still running then are cancelled and their messages given back at once;
// Shutdown then returns ErrCutOff, at the deadline even if a handler ignores
// its context (its goroutine ends when it returns; its answer is discarded).
// It is idempotent, and returns when Run has.
func (s *Server) Shutdown(ctx context.Context) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(s.shutdownTimeout())
	}
	return s.stop(deadline)
}

// Close stops at once: running handlers are cancelled and every unsettled
// message goes back to the broker. It returns when Run has.
func (s *Server) Close() error {
	err := s.stop(time.Now())
	if errors.Is(err, ErrCutOff) {
		return nil // cutting handlers off is what Close is for
	}
	return err
}

// stop asks the running engine, if any, to stop by deadline and waits for
// Run to return.
func (s *Server) stop(deadline time.Time) error {
	s.mu.Lock()
	s.closed = true
	e := s.run
	s.mu.Unlock()
	if e == nil {
		return nil
	}
	return e.Stop(deadline)
}

func (s *Server) shutdownTimeout() time.Duration {
	if s.ShutdownTimeout > 0 {
		return s.ShutdownTimeout
	}
	return DefaultShutdownTimeout
}

func (s *Server) handlerTimeout() time.Duration {
	if s.HandlerTimeout == 0 {
		return DefaultHandlerTimeout
	}
	return s.HandlerTimeout
}

func (s *Server) publishTimeout() time.Duration {
	if s.PublishTimeout > 0 {
		return s.PublishTimeout
	}
	return DefaultPublishTimeout
}
