package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
)

// stopFixture shuts f's server down and waits for Run, leaving its error
// for the fixture's own cleanup.
func stopFixture(t *testing.T, f *fixture) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(ctx)
	select {
	case err := <-f.runErr:
		f.runErr <- err
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after Shutdown")
		return nil
	}
}

// oneLine is the only entry of logs with message msg.
func oneLine(t *testing.T, logs *observer.ObservedLogs, msg string) observer.LoggedEntry {
	t.Helper()
	got := logs.FilterMessage(msg).All()
	if len(got) != 1 {
		t.Fatalf("%d lines %q, want 1", len(got), msg)
	}
	return got[0]
}

// The start-up line says what is consumed and how; the drain's line how
// many were handled and given back, and how long the drain took.
func TestRunLogsStartAndDrain(t *testing.T) {
	t.Parallel()
	h := always(ack.Accept())
	f := start(t, &acemq.Server{Prefetch: 8, Concurrency: 2, Queues: map[string]acemq.QueueConfig{"parcels": {Concurrency: 5}}},
		map[string]acemq.Handler{"orders": h, "parcels": always(ack.Accept())})
	started := oneLine(t, f.logs, "acemq: server started").ContextMap()
	for k, want := range map[string]any{"queues": int64(2), "prefetch": "8", "concurrency": "2-5", "acemq": "(devel)"} {
		if started[k] != want {
			t.Errorf("start-up line %s = %v (%T), want %v", k, started[k], started[k], want)
		}
	}
	if names, _ := started["consuming"].([]any); len(names) != 2 {
		t.Errorf("start-up line consuming = %v, want both queues", started["consuming"])
	}
	if b, _ := started["broker"].(string); b == "" {
		t.Error("the start-up line does not name the broker")
	}
	for range 3 {
		f.publish("orders", `{}`, nil)
	}
	f.eventually("three handled", func() bool { return h.count() == 3 && f.broker.Unacked("orders") == 0 })
	if err := stopFixture(t, f); err != nil {
		t.Fatalf("Run = %v", err)
	}
	stopped := oneLine(t, f.logs, "acemq: server stopped")
	m := stopped.ContextMap()
	if stopped.Level != zapcore.InfoLevel || m["handled"] != int64(3) || m["given_back"] != int64(0) || m["cut_off"] != int64(0) {
		t.Errorf("drain line %v %v, want info, 3 handled, none given back or cut off", stopped.Level, m)
	}
	for _, k := range []string{"drain_took", "ran_for"} {
		if d, err := time.ParseDuration(m[k].(string)); err != nil || d < 0 {
			t.Errorf("drain line %s = %v, want a duration", k, m[k])
		}
	}
}

// A handler still running at the deadline is cut off and its delivery
// given back: the drain's line is a warning that counts both.
func TestRunLogsACutDrain(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stuck := &recorder{answer: func(*acemq.Message) ack.Ack {
		<-release // heeds no context
		return ack.Accept()
	}}
	f := start(t, &acemq.Server{Concurrency: 1, ShutdownTimeout: 50 * time.Millisecond}, map[string]acemq.Handler{"orders": stuck})
	f.publish("orders", `{}`, nil)
	f.eventually("the handler runs", func() bool { return stuck.count() == 1 })
	if err := stopFixture(t, f); !errors.Is(err, acemq.ErrCutOff) {
		t.Fatalf("Run = %v, want ErrCutOff", err)
	}
	stopped := oneLine(t, f.logs, "acemq: server stopped")
	m := stopped.ContextMap()
	if stopped.Level != zapcore.WarnLevel || m["cut_off"] != int64(1) || m["given_back"] != int64(1) || m["handled"] != int64(0) {
		t.Errorf("drain line %v %v, want a warning, 1 cut off and given back, none handled", stopped.Level, m)
	}
}

// Every retry line carries the handler's error, cut to a kilobyte, so a
// 429 can be told from a 500 after the fact; a snooze line has none.
func TestRetryLinesCarryTheError(t *testing.T) {
	t.Parallel()
	long := "HTTP 502 Bad Gateway: " + strings.Repeat("<html>", 2000)
	h := &recorder{answer: func(m *acemq.Message) ack.Ack {
		switch m.Attempt() {
		case 1:
			return ack.Retry(errors.New("partner: HTTP 429 Too Many Requests"))
		case 2:
			return ack.RetryAfter(time.Second, errors.New("partner: HTTP 500 Internal Server Error"))
		case 3:
			if m.Envelope().Snoozes == 0 {
				return ack.Snooze(time.Second)
			}
			return ack.Retry(errors.New(long))
		}
		return ack.Accept()
	}}
	f := start(t, &acemq.Server{Retry: retry.Fixed(5, time.Second).WithJitter(0)}, map[string]acemq.Handler{"orders": h})
	f.publish("orders", `{}`, nil)
	for n := 2; n <= 5; n++ {
		f.eventually("the next delivery", func() bool { return h.count() == n-1 })
		f.advance(1, time.Second)
	}
	f.eventually("accepted", func() bool { return h.count() == 5 && f.broker.Unacked("orders") == 0 })
	var errs []string
	for _, e := range f.logs.FilterMessage("acemq: retry scheduled").All() {
		s, _ := e.ContextMap()["error"].(string)
		errs = append(errs, s)
	}
	if len(errs) != 3 || !strings.Contains(errs[0], "429") || !strings.Contains(errs[1], "500") ||
		!strings.HasPrefix(errs[2], "HTTP 502 Bad Gateway") || len(errs[2]) > 1100 || !strings.Contains(errs[2], "bytes, sha256:") {
		t.Errorf("retry lines' errors %.200q, want the 429, the 500 and the 502 cut to a kilobyte", errs)
	}
	for _, e := range f.logs.FilterMessage("acemq: snoozed").All() {
		if _, ok := e.ContextMap()["error"]; ok {
			t.Errorf("a snooze line carries an error: %v", e.ContextMap())
		}
	}
}

// A 100 KB id is logged as its start and a hash on every line, not whole
// on each.
func TestLongIDsAreCappedInLogs(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("order-", 100<<10/6)
	h := &recorder{answer: func(m *acemq.Message) ack.Ack {
		if m.Attempt() == 1 {
			return ack.Retry(errors.New("not yet"))
		}
		return ack.DeadLetter(errors.New("no such order " + m.ID()))
	}}
	f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Second).WithJitter(0)}, map[string]acemq.Handler{"orders": h})
	publishID(t, f, "orders", id)
	f.eventually("the first attempt", func() bool { return h.count() == 1 })
	f.advance(1, time.Second)
	// The reason, with the id in it, may be too large for the copy's
	// headers: then the copy is parked, trimmed. Either way it is set aside.
	f.eventually("set aside", func() bool { return f.broker.Depth("orders.dlq")+f.broker.Depth("orders.parked") == 1 })
	total, lines := 0, 0
	for _, e := range f.logs.All() {
		for _, fld := range e.Context {
			total += len(fld.String)
			if fld.Key == "id" && strings.HasPrefix(fld.String, "order-") {
				lines++
				if len(fld.String) > 256+64 || !strings.Contains(fld.String, "bytes, sha256:") {
					t.Errorf("%q: id of %d bytes %.80q…, want it cut to 256 and a hash", e.Message, len(fld.String), fld.String)
				}
			}
		}
	}
	if lines < 2 || total > 32<<10 {
		t.Errorf("%d lines name the id, %d bytes of strings logged in all; want at least 2, and a few KB", lines, total)
	}
}
