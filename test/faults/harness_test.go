package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// job is what a scenario's message body tells the handler to do, so that a
// consumer in another process follows the same script.
type job struct {
	ID string `json:"id"`
	// FailUntil asks for a retry while the attempt is below it.
	FailUntil int `json:"failUntil,omitempty"`
	// Always asks for a retry every time: the message ends in the .dlq,
	// exhausted.
	Always bool `json:"always,omitempty"`
	// Reject dead-letters the message at once.
	Reject bool `json:"reject,omitempty"`
	// Park parks it.
	Park bool `json:"park,omitempty"`
}

// Where a message ends.
const (
	endAccepted = "accepted"
	endDLQ      = "deadlettered"
	endParked   = "parked"
)

func (j job) expect() string {
	switch {
	case j.Always, j.Reject:
		return endDLQ
	case j.Park:
		return endParked
	}
	return endAccepted
}

// jobs returns n jobs named prefix-0000...: most accepted at once, one in
// ten after two retries, one in twenty-five exhausted, one in fifty
// rejected, one in forty parked.
func jobs(prefix string, n int) []job {
	out := make([]job, n)
	for i := range out {
		j := job{ID: fmt.Sprintf("%s-%04d", prefix, i)}
		switch {
		case i%25 == 7:
			j.Always = true
		case i%40 == 11:
			j.Park = true
		case i%50 == 19:
			j.Reject = true
		case i%10 == 3:
			j.FailUntil = 3
		}
		out[i] = j
	}
	return out
}

// testPolicy is the retry policy of the scenarios: four attempts, the first
// wait in the process and the next two on rungs (200ms, 400ms), so that a
// fault finds messages in every place a retry can be.
func testPolicy() retry.Policy {
	return retry.Exponential(4, 100*time.Millisecond, 0).WithJitter(0).WithBrokerWaitThreshold(200 * time.Millisecond)
}

var errScripted = errors.New("the script says fail")

// ledger records what handlers did, by message id.
type ledger struct {
	mu       sync.Mutex
	accepted map[string]int
	calls    map[string]int
}

func newLedger() *ledger {
	return &ledger{accepted: map[string]int{}, calls: map[string]int{}}
}

// handler follows each message's script, taking work per call.
func (l *ledger) handler(work time.Duration) acemq.Handler {
	return acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, j job) ack.Ack {
		l.mu.Lock()
		l.calls[m.ID()]++
		l.mu.Unlock()
		if work > 0 {
			select {
			case <-time.After(work):
			case <-ctx.Done():
				return ack.Retry(ctx.Err())
			}
		}
		a := script(m, j)
		if a.Outcome() == ack.OutcomeAccept {
			l.mu.Lock()
			l.accepted[m.ID()]++
			l.mu.Unlock()
		}
		return a
	})
}

// script is what a handler answers to j on m's attempt.
func script(m *acemq.Message, j job) ack.Ack {
	switch {
	case j.Always, m.Attempt() < j.FailUntil:
		return ack.Retry(errScripted)
	case j.Reject:
		return ack.DeadLetter(errScripted)
	case j.Park:
		return ack.Park(errScripted)
	}
	return ack.Accept()
}

func (l *ledger) acceptedCopy() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.accepted))
	for k, v := range l.accepted {
		out[k] = v
	}
	return out
}

func (l *ledger) totalCalls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		n += c
	}
	return n
}

// allAccepted reports whether every job expected to be accepted was.
func (l *ledger) allAccepted(js []job) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, j := range js {
		if j.expect() == endAccepted && l.accepted[j.ID] == 0 {
			return false
		}
	}
	return true
}

// dial connects a transport to url for the test, with quick reconnects and
// confirm timeouts, and closes it at the end.
func dial(tb testing.TB, url string, log *zap.Logger, opts ...rabbitmq.Option) *rabbitmq.Transport {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts = append([]rabbitmq.Option{
		rabbitmq.WithLogger(log),
		rabbitmq.WithBackoff(50*time.Millisecond, time.Second),
		rabbitmq.WithConfirmTimeout(5 * time.Second),
		rabbitmq.WithConnectionName("acemq-faults " + tb.Name()),
	}, opts...)
	tr, err := rabbitmq.Dial(ctx, url, opts...)
	if err != nil {
		tb.Fatalf("dial: %v", err)
	}
	tb.Cleanup(func() { _ = tr.Close() })
	return tr
}

// testLogger keeps the library's log lines (info and up) and shows the last
// of them if the test fails.
func testLogger(tb testing.TB) *zap.Logger {
	tb.Helper()
	buf := &lockedBuffer{}
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(buf), zap.InfoLevel)
	tb.Cleanup(func() {
		if !tb.Failed() {
			return
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) > 80 {
			tb.Logf("(%d earlier log lines not shown)", len(lines)-80)
			lines = lines[len(lines)-80:]
		}
		tb.Logf("library log:\n%s", strings.Join(lines, "\n"))
	})
	return zap.New(core)
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// running is a Server running in the background.
type running struct {
	srv  *acemq.Server
	done chan error
}

// serve runs srv with h on queue over tr until stop or the end of the test,
// once it consumes. srv's Transport, Handler and Logger are set here unless
// already set.
func serve(tb testing.TB, tr transport.Transport, queue string, srv *acemq.Server, h acemq.Handler, log *zap.Logger) *running {
	tb.Helper()
	if srv.Handler == nil {
		mux := acemq.NewMux()
		mux.Handle(queue, h)
		srv.Handler = mux
	}
	if srv.Transport == nil {
		srv.Transport = tr
	}
	if srv.Logger == nil {
		srv.Logger = log
	}
	r := &running{srv: srv, done: make(chan error, 1)}
	go func() { r.done <- srv.Run(context.Background()) }()
	tb.Cleanup(func() { r.stop(tb) })
	polltest.Within(tb, 60*time.Second, "the server consumes "+queue, func() bool {
		select {
		case err := <-r.done:
			r.done <- err
			tb.Fatalf("Run: %v", err)
		default:
		}
		info, err := tr.Inspect(context.Background(), queue)
		return err == nil && info.Consumers > 0
	})
	return r
}

// stop shuts the server down and returns Run's error; it may be called
// more than once. A Shutdown that does not return is reported, not waited
// for forever.
func (r *running) stop(tb testing.TB) error {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { _ = r.srv.Shutdown(ctx) }()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(20 * time.Second):
		tb.Errorf("Run did not return within 20s of Shutdown with a 10s deadline")
		return errors.New("acemq faults: Run hung in Shutdown")
	}
}

func body(j job) []byte {
	b, _ := json.Marshal(j)
	return b
}

// publishStats is what publishing under a fault went through.
type publishStats struct {
	mu       sync.Mutex
	failures int
	errs     []string // the first few distinct errors
	kinds    map[string]int
}

func (s *publishStats) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures++
	if s.kinds == nil {
		s.kinds = map[string]int{}
	}
	switch {
	case errors.Is(err, transport.ErrNacked):
		s.kinds["nacked"]++
	case errors.Is(err, transport.ErrUnconfirmed):
		s.kinds["unconfirmed"]++
	case errors.Is(err, transport.ErrBlocked):
		s.kinds["blocked"]++
	case errors.Is(err, transport.ErrStalled):
		s.kinds["stalled"]++
	case errors.Is(err, transport.ErrClosed):
		s.kinds["closed"]++
	default:
		s.kinds["other"]++
	}
	msg := err.Error()
	if len(s.errs) < 5 && !slices.Contains(s.errs, msg) {
		s.errs = append(s.errs, msg)
	}
}

func (s *publishStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d failed publish attempts %v, first: %q", s.failures, s.kinds, s.errs)
}

// publishAll publishes js to queue from workers goroutines, one message per
// pace per goroutine, each retried until the broker confirms it: what a
// producer that keeps its promise does. It returns the jobs confirmed,
// failing the test if some never were.
func publishAll(tb testing.TB, tr transport.Transport, queue string, js []job, workers int, pace time.Duration, stats *publishStats) []job {
	tb.Helper()
	return publishEach(tb, tr, js, workers, pace, stats, nil, func(_ int, j job) acemq.Outgoing {
		return acemq.Outgoing{RoutingKey: queue, ID: j.ID, Body: body(j), ContentType: "application/json"}
	})
}

// untilConfirmed calls publish, each call given 3 s, until it succeeds
// (nil), or fails once the deadline has passed or the transport is closed
// (that failure): 100 ms apart, every failure counted in stats. The
// producers of the scenarios publish each message this way.
func untilConfirmed(deadline time.Time, stats *publishStats, publish func(ctx context.Context) error) error {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := publish(ctx)
		cancel()
		if err == nil {
			return nil
		}
		stats.fail(err)
		if time.Now().After(deadline) || errors.Is(err, transport.ErrClosed) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// publishEach is publishAll with the publishing of job i built by out:
// each retried until the broker confirms it, counted in confirmedN (if
// any), and the confirmed ones returned.
func publishEach(tb testing.TB, tr transport.Transport, js []job, workers int, pace time.Duration, stats *publishStats, confirmedN *atomic.Int64, out func(int, job) acemq.Outgoing) []job {
	tb.Helper()
	pub := &acemq.Publisher{Transport: tr, Mandatory: true}
	deadline := time.Now().Add(90 * time.Second)
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var confirmed []job
	for range workers {
		wg.Go(func() {
			for i := range next {
				if untilConfirmed(deadline, stats, func(ctx context.Context) error {
					_, err := pub.Publish(ctx, out(i, js[i]))
					return err
				}) == nil {
					mu.Lock()
					confirmed = append(confirmed, js[i])
					mu.Unlock()
					if confirmedN != nil {
						confirmedN.Add(1)
					}
				}
				time.Sleep(pace)
			}
		})
	}
	for i := range js {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(confirmed) != len(js) {
		tb.Errorf("only %d of %d messages were ever confirmed: %s", len(confirmed), len(js), stats)
	}
	return confirmed
}
