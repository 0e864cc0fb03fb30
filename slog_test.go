package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/logging/logtest"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/retry"
)

// TestNoLoggerLogsToSlogDefault: a server given no logger writes the
// missing rung, an error the docs promise is loud, to slog.Default(), and
// keeps its info lines (a retry scheduled) to itself. Not parallel: it sets
// slog's default, and the parallel tests wait until it is done.
func TestNoLoggerLogsToSlogDefault(t *testing.T) {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	rec := logtest.New(slog.LevelDebug)
	slog.SetDefault(slog.New(rec))

	broker, conn := bare(t)
	h := &answers{acks: []ack.Ack{ack.Retry(errBoom), ack.Accept()}}
	mux := acemq.NewMux()
	mux.Handle("invoices", h)
	srv := &acemq.Server{Transport: conn, Handler: mux, Retry: retry.Fixed(3, time.Minute)}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	if !broker.DeleteQueue("invoices.retry.1m") {
		t.Fatal("the rung was not declared at start-up")
	}
	f := &fixture{t: t, broker: broker, conn: conn}
	publishID(t, f, "invoices", "inv-1")
	missing := func() []logtest.Entry {
		return slices.DeleteFunc(rec.Entries(), func(e logtest.Entry) bool {
			return e.Message == "" || e.Attrs["queue"].String() != "invoices"
		})
	}
	f.eventually("the missing rung is logged", func() bool { return len(missing()) > 0 })
	f.advance(1, time.Minute) // held in the process instead
	f.eventually("the retry is accepted", func() bool { return len(h.deliveries()) == 2 && broker.Unacked("invoices") == 0 })

	got := missing()
	if len(got) != 1 {
		t.Fatalf("slog.Default() got %d lines about invoices, want the missing rung only: %+v", len(got), got)
	}
	e := got[0]
	want := map[string]string{"queue": "invoices", "id": "inv-1", "rung": "invoices.retry.1m", "wait": "1m0s"}
	if e.Level != slog.LevelError {
		t.Errorf("logged at %s, want error", e.Level)
	}
	for k, w := range want {
		if v, ok := e.Attrs[k]; !ok || v.Kind() != slog.KindString || v.String() != w {
			t.Errorf("%s = %v, want the string %q (%q: %v)", k, v, w, e.Message, e.Attrs)
		}
	}
}

// TestLogLinesAboutAMessage walks one message through in-process waits, a
// snooze and a RetryAfter on the delay queues, a rung and a dead letter,
// and another to parked, with middleware.Logging in front: every line with
// an id has its queue and the other way round, no duration is a bare
// number, and each retry says its wait and where it waits.
func TestLogLinesAboutAMessage(t *testing.T) {
	t.Parallel()
	orders := &answers{acks: []ack.Ack{
		ack.Retry(errBoom),                   // attempt 1: 10s in the process
		ack.Retry(errBoom),                   // attempt 2: 20s in the process
		ack.Snooze(time.Hour),                // attempt 2 again: on the delay queues
		ack.Retry(errBoom),                   // attempt 3: 40s on a rung
		ack.RetryAfter(2*time.Hour, errBoom), // attempt 4: the handler's wait, on the delay queues
		ack.Retry(errBoom),                   // attempt 5: exhausted
	}}
	parcels := &answers{acks: []ack.Ack{ack.Park(errors.New("unreadable"))}}
	var f *fixture
	logged := func(h acemq.Handler) acemq.Handler { // the fixture's logger, known once it has started
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			return middleware.Logging(middleware.WithLogger(f.srv.Logger))(h).ServeMessage(ctx, m)
		})
	}
	f = start(t, &acemq.Server{Retry: retry.Exponential(5, 10*time.Second, time.Minute).WithJitter(0)},
		map[string]acemq.Handler{"orders": logged(orders), "parcels": logged(parcels)})
	publishID(t, f, "orders", "o-1")
	publishID(t, f, "parcels", "p-1")

	delivered := func(n int) {
		t.Helper()
		f.eventually("delivery", func() bool { return len(orders.deliveries()) == n })
	}
	delivered(1)
	f.advance(1, 10*time.Second)
	delivered(2)
	f.advance(1, 20*time.Second)
	delivered(3)
	f.eventually("the snooze waits on a level", func() bool { return onLevel(f.broker) != "" })
	f.broker.Clock().Advance(time.Hour)
	delivered(4)
	f.eventually("the retry waits on its rung", func() bool { return f.broker.Depth("orders.retry.40s") == 1 })
	f.broker.Clock().Advance(40 * time.Second)
	delivered(5)
	f.eventually("the RetryAfter waits on a level", func() bool { return onLevel(f.broker) != "" })
	f.broker.Clock().Advance(2 * time.Hour)
	delivered(6)
	f.eventually("both given up on", func() bool { return f.logs.FilterMessage("acemq: message given up on").Len() == 2 })

	// A broker wait's line is written by the original's worker once its
	// copy is confirmed, which a loaded machine can leave behind the copy's
	// next delivery, and so behind the give-ups: wait for all five of o-1.
	f.eventually("o-1's five retry and snooze lines", func() bool {
		n := 0
		for _, e := range f.logs.All() {
			if e.ContextMap()["id"] == "o-1" && (e.Message == "acemq: retry scheduled" || e.Message == "acemq: snoozed") {
				n++
			}
		}
		return n == 5
	})
	entries := f.logs.All()
	for _, e := range entries {
		m := e.ContextMap()
		_, id := m["id"]
		_, queue := m["queue"]
		if id != queue {
			t.Errorf("%q: id %v, queue %v: %v", e.Message, id, queue, m)
		}
		for _, fld := range e.Context {
			if fld.Type == zapcore.DurationType {
				t.Errorf("%q: %s is a zap.Duration, a bare number in JSON", e.Message, fld.Key)
			}
		}
		for _, k := range []string{"wait", "after", "took", "held_for", "timeout", "retry_in"} {
			if v, ok := m[k]; ok {
				if _, isString := v.(string); !isString {
					t.Errorf("%q: %s = %v (%T), want a string with its unit", e.Message, k, v, v)
				}
			}
		}
	}

	type step struct{ msg, wait, where, to string }
	var steps []step
	for _, e := range entries {
		if m := e.ContextMap(); m["id"] == "o-1" && (e.Message == "acemq: retry scheduled" || e.Message == "acemq: snoozed") {
			steps = append(steps, step{e.Message, m["wait"].(string), m["where"].(string), m["to"].(string)})
		}
	}
	want := []step{
		{"acemq: retry scheduled", "10s", "process", "orders"},
		{"acemq: retry scheduled", "20s", "process", "orders"},
		{"acemq: snoozed", "1h0m0s", "delay queues", "orders"},
		{"acemq: retry scheduled", "40s", "rung", "orders.retry.40s"},
		{"acemq: retry scheduled", "2h0m0s", "delay queues", "orders"},
	}
	// A broker wait's line is written once the broker took its copy, by
	// the original's worker, which a loaded machine can leave behind the
	// copy's next delivery: the lines are compared as a set.
	byText := func(a, b step) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) }
	slices.SortFunc(steps, byText)
	slices.SortFunc(want, byText)
	if !slices.Equal(steps, want) {
		t.Errorf("retry lines\n%v\nwant\n%v", steps, want)
	}
	if n := f.logs.FilterMessage("acemq: handled").Filter(func(e observer.LoggedEntry) bool { return e.ContextMap()["after"] == "2h0m0s" }).Len(); n != 1 {
		t.Errorf("%d handled lines with after=2h0m0s, want the RetryAfter's", n)
	}
	for _, want := range []observer.LoggedEntry{
		{Context: []zap.Field{zap.String("queue", "orders"), zap.String("id", "o-1"), zap.String("to", "orders.dlq")}},
		{Context: []zap.Field{zap.String("queue", "parcels"), zap.String("id", "p-1"), zap.String("to", "parcels.parked")}},
	} {
		logs := f.logs.FilterMessage("acemq: message given up on")
		for _, fld := range want.Context {
			logs = logs.FilterField(fld)
		}
		if logs.Len() != 1 {
			t.Errorf("no give-up line with %v", want.Context)
		}
	}
}

// publishID publishes an empty JSON body with the id given.
func publishID(tb testing.TB, f *fixture, queue, id string) {
	tb.Helper()
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: queue, ID: id, Body: []byte("{}")}); err != nil {
		tb.Fatalf("publish to %s: %v", queue, err)
	}
}
