package faults_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
)

// TestFaultShutdownIgnoredContext: a handler that ignores its context
// (it sleeps 30 s on some messages) while messages flow. Shutdown with a
// 1 s deadline returns ErrCutOff at the deadline, not when the handler
// returns, and Run returns too; the cut messages are back in the queue at
// once, and a second server started after handles them. The stubborn
// handlers' late answer is a park: had it any effect, the message would be
// in .parked as well as accepted, a duplicate. It must be discarded.
func TestFaultShutdownIgnoredContext(t *testing.T) {
	t.Parallel()
	const name = "shutdown-ignored-context"
	const deadline, bound = time.Second, 5 * time.Second
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	var discarded atomic.Int64
	log := testLogger(t).WithOptions(zap.Hooks(func(e zapcore.Entry) error {
		if strings.Contains(e.Message, "its answer is discarded") {
			discarded.Add(1)
		}
		return nil
	}))
	q := "faults." + name
	pol := testPolicy()
	js := jobs(name, 300)
	stubborn := map[string]bool{}
	for _, i := range []int{20, 40, 60} { // accepted at once by their script
		stubborn[js[i].ID] = true
	}
	l := newLedger()
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	var started, returned atomic.Int64
	errLate := errors.New("the late answer of a handler the shutdown cut off")
	normal := l.handler(time.Millisecond)
	first := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		if !stubborn[m.ID()] {
			return normal.ServeMessage(ctx, m)
		}
		started.Add(1)
		defer returned.Add(1)
		select { // ctx is ignored
		case <-time.After(30 * time.Second):
		case <-release:
		}
		return ack.Park(errLate)
	})
	pubTr := dial(t, url, log)
	run := serve(t, dial(t, url, log), q, &acemq.Server{Retry: pol, Concurrency: 8}, first, log)
	stats := &publishStats{}
	published := make(chan []job, 1)
	go func() { published <- publishAll(t, pubTr, q, js, 2, 10*time.Millisecond, stats) }()
	polltest.Within(t, 30*time.Second, "every stubborn handler runs", func() bool { return started.Load() == int64(len(stubborn)) })

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	began := time.Now()
	err := run.srv.Shutdown(ctx)
	took := time.Since(began)
	if !errors.Is(err, acemq.ErrCutOff) {
		t.Errorf("Shutdown = %v, want ErrCutOff", err)
	}
	select {
	case runErr := <-run.done:
		run.done <- runErr
		if !errors.Is(runErr, acemq.ErrCutOff) {
			t.Errorf("Run = %v, want ErrCutOff", runErr)
		}
	case <-time.After(bound - took):
		t.Fatalf("Run did not return within %s of Shutdown with a %s deadline", bound, deadline)
	}
	ranFor := time.Since(began)
	t.Logf("%s: Shutdown with a %s deadline returned %v after %s, Run after %s; %d stubborn handlers still running",
		name, deadline, err, took.Round(time.Millisecond), ranFor.Round(time.Millisecond), started.Load()-returned.Load())
	if took > bound {
		t.Errorf("Shutdown with a %s deadline took %s, want at most %s", deadline, took, bound)
	}
	if returned.Load() != 0 {
		t.Errorf("%d stubborn handlers returned before they were released", returned.Load())
	}

	// Another instance takes the cut messages, redelivered, and the rest.
	var mu sync.Mutex
	redelivered := map[string]bool{}
	second := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		if stubborn[m.ID()] {
			mu.Lock()
			redelivered[m.ID()] = redelivered[m.ID()] || m.Envelope().Redelivered
			mu.Unlock()
		}
		return normal.ServeMessage(ctx, m)
	})
	run2 := serve(t, dial(t, url, log), q, &acemq.Server{Retry: pol}, second, log)
	sent := <-published
	t.Logf("%s: producer: %s", name, stats)
	sk := newSink(url, q)
	if !polltest.Until(60*time.Second, sk.settled(l, sent)) {
		t.Errorf("%s: not settled within 60s", name)
	}
	mu.Lock()
	for id := range stubborn {
		if !redelivered[id] {
			t.Errorf("%s, cut off at the deadline, was not redelivered to the second server", id)
		}
	}
	mu.Unlock()

	// Now the stubborn handlers answer, late: nothing may come of it.
	releaseAll()
	polltest.Within(t, 60*time.Second, "every late answer is logged as discarded", func() bool {
		return returned.Load() == int64(len(stubborn)) && discarded.Load() == int64(len(stubborn))
	})
	if err := run2.stop(t); err != nil {
		t.Errorf("Run of the second server: %v", err)
	}
	r := sk.collect(t, name, sent, l.acceptedCopy(), pol).report(t)
	if r.duplicates != 0 {
		t.Errorf("%d duplicates after a shutdown that cut %d handlers off: a late answer had an effect, or an ack was lost", r.duplicates, len(stubborn))
	}
}
