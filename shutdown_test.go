package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
)

// blocking is a handler that signals when it starts and waits for release
// or for its context to end.
type blocking struct {
	started chan string
	release chan struct{}
	sawCtx  chan error
}

func newBlocking() *blocking {
	return &blocking{started: make(chan string, 100), release: make(chan struct{}), sawCtx: make(chan error, 100)}
}

func (b *blocking) ServeMessage(ctx context.Context, m *acemq.Message) ack.Ack {
	b.started <- m.ID()
	select {
	case <-b.release:
		return ack.Accept()
	case <-ctx.Done():
		b.sawCtx <- ctx.Err()
		return ack.Retry(ctx.Err())
	}
}

func TestShutdownFinishesRunningHandlers(t *testing.T) {
	t.Parallel()
	h := newBlocking()
	f := start(t, &acemq.Server{Concurrency: 1}, map[string]acemq.Handler{"q": h})
	f.publish("q", "{}", nil)
	<-h.started
	go func() { time.Sleep(20 * time.Millisecond); close(h.release) }()
	shutdownErr, runErr := f.stop(5 * time.Second)
	if shutdownErr != nil || runErr != nil {
		t.Errorf("Shutdown = %v, Run = %v; want nil, nil", shutdownErr, runErr)
	}
	if f.broker.Depth("q")+f.broker.Unacked("q") != 0 {
		t.Error("the finished message was not acked")
	}
}

func TestShutdownDeadlineCutsHandlersOff(t *testing.T) {
	t.Parallel()
	h := newBlocking()
	f := start(t, &acemq.Server{Concurrency: 1}, map[string]acemq.Handler{"q": h})
	res := f.publish("q", "{}", nil)
	<-h.started
	shutdownErr, runErr := f.stop(50 * time.Millisecond)
	if !errors.Is(shutdownErr, acemq.ErrCutOff) || !errors.Is(runErr, acemq.ErrCutOff) {
		t.Errorf("Shutdown = %v, Run = %v; want ErrCutOff", shutdownErr, runErr)
	}
	if err := <-h.sawCtx; !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's context ended with %v", err)
	}
	d := f.only("q")
	if !d.Redelivered || d.Headers["x-acemq-id"] != res.ID || fmt.Sprint(d.Headers["x-acemq-attempt"]) != "1" {
		t.Errorf("the cut-off message is not back as it was: redelivered=%v headers=%v", d.Redelivered, d.Headers)
	}
	if f.broker.Depth("q.dlq") != 0 {
		t.Error("a cut-off message was dead-lettered")
	}
}

func TestShutdownGivesBackWhatItHadNotStarted(t *testing.T) {
	t.Parallel()
	h := newBlocking()
	f := start(t, &acemq.Server{Concurrency: 1, Prefetch: 10}, map[string]acemq.Handler{"q": h})
	for range 5 {
		f.publish("q", "{}", nil)
	}
	<-h.started
	f.eventually("all five delivered to the server", func() bool { return f.broker.Unacked("q") == 5 })
	stopped := make(chan error, 1)
	go func() { s, _ := f.stop(5 * time.Second); stopped <- s }()
	f.eventually("four given back at once", func() bool { return f.broker.Depth("q") == 4 && f.broker.Unacked("q") == 1 })
	close(h.release)
	if err := <-stopped; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if n := len(h.started); n != 0 {
		t.Errorf("%d messages were started after the stop", n)
	}
	if f.broker.Depth("q") != 4 || f.broker.Unacked("q") != 0 {
		t.Errorf("depth %d unacked %d, want 4 and 0", f.broker.Depth("q"), f.broker.Unacked("q"))
	}
}

func TestShutdownDoesNotWaitOutARetryWait(t *testing.T) {
	t.Parallel()
	h := always(ack.Retry(errBoom))
	f := start(t, &acemq.Server{Retry: retry.Fixed(5, 20*time.Second)}, map[string]acemq.Handler{"q": h})
	res := f.publish("q", "{}", nil)
	f.eventually("attempt 1", func() bool { return h.count() == 1 })
	f.broker.Clock().BlockUntil(context.Background(), 1)
	shutdownErr, runErr := f.stop(5 * time.Second)
	if shutdownErr != nil || runErr != nil {
		t.Errorf("Shutdown = %v, Run = %v", shutdownErr, runErr)
	}
	d := f.only("q")
	if d.Headers["x-acemq-id"] != res.ID || fmt.Sprint(d.Headers["x-acemq-attempt"]) != "2" || d.Redelivered {
		t.Errorf("the waiting message was not republished with its attempt raised: %v", d.Headers)
	}
	if f.broker.Unacked("q") != 0 {
		t.Error("the original is still held")
	}
}

func TestRunStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	_, conn := bare(t)
	srv := &acemq.Server{Transport: conn, Handler: acceptMux("q")}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	<-srv.Ready()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v after its context ended", err)
	}
	if err := srv.Run(context.Background()); !errors.Is(err, acemq.ErrServerClosed) {
		t.Errorf("Run after a stop = %v", err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Errorf("a second Shutdown = %v", err)
	}
}

func TestCloseStopsAtOnce(t *testing.T) {
	t.Parallel()
	h := newBlocking()
	f := start(t, &acemq.Server{Concurrency: 1, ShutdownTimeout: time.Hour}, map[string]acemq.Handler{"q": h})
	f.publish("q", "{}", nil)
	<-h.started
	if err := f.srv.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if d := f.only("q"); !d.Redelivered {
		t.Error("the running message did not go back")
	}
}

func TestShutdownBeforeRun(t *testing.T) {
	t.Parallel()
	srv := &acemq.Server{}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown before Run = %v", err)
	}
	if err := srv.Run(context.Background()); !errors.Is(err, acemq.ErrServerClosed) {
		t.Errorf("Run after Shutdown = %v", err)
	}
}

func TestRunNeedsQueues(t *testing.T) {
	t.Parallel()
	_, conn := bare(t)
	srv := &acemq.Server{Transport: conn, Handler: acemq.NewMux()}
	if err := srv.Run(context.Background()); !errors.Is(err, acemq.ErrNoQueues) {
		t.Errorf("Run with an empty mux = %v", err)
	}
}

// TestShutdownIsBoundedByAHandlerThatIgnoresItsContext: at the deadline
// Shutdown and Run return ErrCutOff although the handler is still running;
// its message is back in the queue at the deadline, not when the handler
// returns, and the handler's late answer is discarded.
func TestShutdownIsBoundedByAHandlerThatIgnoresItsContext(t *testing.T) {
	t.Parallel()
	started, release, returned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	stubborn := acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
		defer close(returned)
		close(started)
		<-release // ignores its context
		return ack.Accept()
	})
	f := start(t, &acemq.Server{Concurrency: 1}, map[string]acemq.Handler{"q": stubborn})
	res := f.publish("q", "{}", nil)
	<-started
	shutdownErr, runErr := f.stop(50 * time.Millisecond)
	if !errors.Is(shutdownErr, acemq.ErrCutOff) || !errors.Is(runErr, acemq.ErrCutOff) {
		t.Errorf("Shutdown = %v, Run = %v; want ErrCutOff", shutdownErr, runErr)
	}
	if d := f.only("q"); !d.Redelivered || d.Headers["x-acemq-id"] != res.ID {
		t.Errorf("the cut-off message is not back: redelivered=%v headers=%v", d.Redelivered, d.Headers)
	}
	close(release)
	<-returned
	f.eventually("the late answer logged as discarded", func() bool {
		return f.logs.FilterMessageSnippet("its answer is discarded").Len() == 1
	})
	if f.broker.Depth("q") != 1 || f.broker.Unacked("q") != 0 {
		t.Errorf("the late accept settled the message: ready %d unacked %d", f.broker.Depth("q"), f.broker.Unacked("q"))
	}
}
