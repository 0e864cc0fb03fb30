package acemq

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// Defaults of a Server's settings.
const (
	DefaultConcurrency     = 4
	DefaultPrefetch        = 32
	DefaultShutdownTimeout = 20 * time.Second
	DefaultPublishTimeout  = 30 * time.Second
)

var (
	// ErrServerClosed is returned by Run called after Shutdown or Close.
	ErrServerClosed = errors.New("acemq: server closed")
	// ErrCutOff says the shutdown deadline cut at least one handler off. Its
	// message was given back to the broker, which redelivers it.
	ErrCutOff = errors.New("acemq: shutdown deadline cut a handler off; its message goes back to the broker")
	// ErrNoQueues is returned by Run when the handler names no queue.
	ErrNoQueues = errors.New("acemq: the server's handler names no queues (use a Mux or Server.Queues)")
)

// QueueConfig is one queue's settings. A zero field takes the server's.
type QueueConfig struct {
	// Retry replaces the server's policy for this queue; it does not merge
	// with it. retry.None() is an explicit "no retry" here.
	Retry retry.Policy
	// Concurrency is how many handlers run at once on this queue.
	Concurrency int
	// Prefetch bounds unsettled deliveries, in-process retry waits included.
	Prefetch int
	// NoDeclare declares nothing for this queue and publishes to no rung:
	// for a user without configure permission. Pair it with a policy whose
	// broker-wait threshold is zero.
	NoDeclare bool
	// Args are the queue's own declaration arguments, for example
	// {"x-queue-type": "quorum"}.
	Args map[string]any
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
	// Queues holds per-queue settings; queues it names but the handler does
	// not are not consumed.
	Queues map[string]QueueConfig
	// Concurrency and Prefetch are the per-queue defaults (4 and 32).
	Concurrency int
	Prefetch    int
	// NoDeclare turns declaration off for every queue.
	NoDeclare bool
	// ShutdownTimeout bounds the wait for running handlers when Run's context
	// ends or Shutdown's context has no deadline. Default 20 s.
	ShutdownTimeout time.Duration
	// PublishTimeout bounds each retry, dead-letter or park publish; a confirm
	// that does not come in time is an unknown outcome and the original is
	// given back to the broker. Default 30 s.
	PublishTimeout time.Duration
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// MeterProvider defaults to a no-op one.
	MeterProvider metric.MeterProvider
	// Clock defaults to the transport's own (the memory transport's virtual
	// clock), else the wall clock.
	Clock transport.Clock

	mu       sync.Mutex
	started  bool
	closed   bool
	stopping chan struct{} // closed when a stop is requested
	deadline time.Time     // when running handlers are cut off
	done     chan struct{} // closed when Run has returned
	cutOff   bool
}

// Run declares each queue's topology (unless declare is off), consumes every
// queue and handles messages until ctx ends or Shutdown or Close is called.
// It returns only when every goroutine it started has ended: nil after a
// clean stop, ErrCutOff when the deadline cut a handler off, or the error
// that stopped it (a refused declaration, a transport that closed).
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
	s.stopping = make(chan struct{})
	s.done = make(chan struct{})
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.done)
	}()

	e, err := s.newEngine(ctx)
	if err != nil {
		return err
	}
	var failure error
	select {
	case <-ctx.Done():
		s.requestStop(time.Now().Add(s.shutdownTimeout()))
	case <-s.stopping:
	case failure = <-e.failed:
		s.requestStop(time.Now().Add(s.shutdownTimeout()))
	}
	cut := e.drain(s.stopDeadline())
	s.mu.Lock()
	s.cutOff = cut
	s.mu.Unlock()
	switch {
	case failure != nil:
		return failure
	case cut:
		return ErrCutOff
	}
	return nil
}

// Shutdown stops the server gracefully: it stops receiving, gives back the
// messages delivered but not started, republishes at once any message in an
// in-process retry wait (attempt raised, nothing lost), and waits for running
// handlers until ctx's deadline (ShutdownTimeout when ctx has none). Handlers
// still running then are cancelled and their messages given back; Shutdown
// then returns ErrCutOff. It is idempotent, and returns when Run has.
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

func (s *Server) stop(deadline time.Time) error {
	s.mu.Lock()
	s.closed = true
	if !s.started {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	s.requestStop(deadline)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cutOff {
		return ErrCutOff
	}
	return nil
}

// requestStop records the first stop's deadline (an earlier one wins) and
// signals the engine.
func (s *Server) requestStop(deadline time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deadline.IsZero() || deadline.Before(s.deadline) {
		s.deadline = deadline
	}
	select {
	case <-s.stopping:
	default:
		close(s.stopping)
	}
}

func (s *Server) stopDeadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

func (s *Server) shutdownTimeout() time.Duration {
	if s.ShutdownTimeout > 0 {
		return s.ShutdownTimeout
	}
	return DefaultShutdownTimeout
}

// queueNames is the queues the handler names.
func (s *Server) queueNames() ([]string, error) {
	if s.Handler == nil {
		return nil, errors.New("acemq: Server.Handler is nil")
	}
	named, ok := s.Handler.(interface{ Queues() []string })
	if !ok || len(named.Queues()) == 0 {
		return nil, ErrNoQueues
	}
	return named.Queues(), nil
}

// queueConfig resolves one queue's settings against the server's.
func (s *Server) queueConfig(queue string) QueueConfig {
	c := s.Queues[queue]
	if c.Retry.IsZero() {
		c.Retry = s.Retry
	}
	c.Concurrency = firstPositive(c.Concurrency, s.Concurrency, DefaultConcurrency)
	c.Prefetch = max(firstPositive(c.Prefetch, s.Prefetch, DefaultPrefetch), c.Concurrency)
	c.NoDeclare = c.NoDeclare || s.NoDeclare
	return c
}

func firstPositive(ns ...int) int {
	for _, n := range ns {
		if n > 0 {
			return n
		}
	}
	return 0
}
