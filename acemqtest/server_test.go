package acemqtest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/tbtest"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

var errDown = errors.New("the warehouse is not answering")

// calls records what a handler was given: attempt and virtual time.
type calls struct {
	mu   sync.Mutex
	seen []call
}

type call struct {
	attempt, snoozes int
	at               time.Duration // since memory.Epoch
	body             string
}

func (c *calls) add(m *acemq.Message, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	env := m.Envelope()
	c.seen = append(c.seen, call{attempt: env.Attempt, snoozes: env.Snoozes, at: now.Sub(memory.Epoch), body: string(m.Body())})
}

func (c *calls) all() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]call(nil), c.seen...)
}

// acceptMux accepts everything on queue.
func acceptMux(queue string) *acemq.Mux {
	mux := acemq.NewMux()
	mux.HandleFunc(queue, func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })
	return mux
}

// scripted returns a mux whose handler of queue answers with answer, and
// what it was called with. clock is read at each call: the broker's, once
// the server runs.
func scripted(queue string, clock func() transport.Clock, answer func(m *acemq.Message) ack.Ack) (*acemq.Mux, *calls) {
	c := &calls{}
	mux := acemq.NewMux()
	mux.HandleFunc(queue, func(_ context.Context, m *acemq.Message) ack.Ack {
		c.add(m, clock().Now())
		return answer(m)
	})
	return mux, c
}

func TestNewServerReturnsSubscribed(t *testing.T) {
	t.Parallel()
	mux := acemq.NewMux()
	for _, q := range []string{"orders", "invoices", "refunds"} {
		mux.HandleFunc(q, func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })
	}
	ts := acemqtest.NewServer(t, mux, nil)
	for _, q := range mux.Queues() {
		info, err := ts.Conn.Inspect(context.Background(), q)
		if err != nil || info.Consumers != 1 {
			t.Errorf("%s: %+v, %v; want one consumer as NewServer returns", q, info, err)
		}
	}
	if err := ts.Server.CheckReady(); err != nil {
		t.Errorf("CheckReady: %v", err)
	}
}

func TestNewServerRefuses(t *testing.T) {
	t.Parallel()
	accept := acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })
	mux := acemq.NewMux()
	mux.Handle("orders", accept)
	for _, tc := range []struct {
		name string
		h    acemq.Handler
		srv  *acemq.Server
		want string
	}{
		{"no handler", nil, nil, "no handler"},
		{"the handler twice", mux, &acemq.Server{Handler: mux}, "given twice"},
		{"a transport of its own", mux, &acemq.Server{Transport: memory.New().Connect()}, "srv.Transport is set"},
		{"a clock of its own", mux, &acemq.Server{Clock: memory.NewClock(time.Time{})}, "srv.Clock is set"},
		{"settings Run refuses", mux, &acemq.Server{Queues: map[string]acemq.QueueConfig{"ordres": {}}}, "Run returned before it subscribed"},
		{"a handler with no queues", accept, nil, "Run returned before it subscribed: " + acemq.ErrNoQueues.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tbtest.Failure(t, func(tb testing.TB) { acemqtest.NewServer(tb, tc.h, tc.srv) })
			if !strings.Contains(got, tc.want) {
				t.Errorf("failed with %q, want it to say %q", got, tc.want)
			}
		})
	}
}

func TestCleanupFailsOnACutOffHandler(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	mux := acemq.NewMux()
	mux.HandleFunc("orders", func(context.Context, *acemq.Message) ack.Ack {
		close(started)
		<-release // ignores its context
		return ack.Accept()
	})
	got := tbtest.Failure(t, func(tb testing.TB) {
		ts := acemqtest.NewServer(tb, mux, &acemq.Server{ShutdownTimeout: time.Millisecond})
		ts.Publish(tb, "orders", "hang")
		<-started
	})
	if !strings.Contains(got, acemq.ErrCutOff.Error()) {
		t.Errorf("failed with %q, want Run's ErrCutOff", got)
	}
}

// plainCodec writes strings as they are, for WithCodec.
type plainCodec struct{}

func (plainCodec) ContentType() string { return "text/plain" }
func (plainCodec) Marshal(v any) ([]byte, error) {
	s, ok := v.(string)
	if !ok {
		return nil, errors.New("plain: not a string")
	}
	return []byte(s), nil
}
func (plainCodec) Unmarshal(data []byte, v any) error { *(v.(*string)) = string(data); return nil }

var _ codec.Codec = plainCodec{}

func TestPublish(t *testing.T) {
	t.Parallel()
	type order struct {
		ID int `json:"id"`
	}
	for _, tc := range []struct {
		name        string
		v           any
		opts        []acemqtest.PublishOption
		body, ctype string
		check       func(t *testing.T, q acemqtest.Queued)
	}{
		{name: "a value, as JSON", v: order{ID: 7}, body: `{"id":7}`, ctype: "application/json"},
		{name: "bytes, as they are", v: []byte("reminder: standup"), body: "reminder: standup"},
		{name: "with a codec", v: "seven", opts: []acemqtest.PublishOption{acemqtest.WithCodec(plainCodec{})}, body: "seven", ctype: "text/plain"},
		{name: "with headers", v: order{ID: 1}, opts: []acemqtest.PublishOption{acemqtest.WithHeaders(map[string]any{"tenant": "acme", acemq.HeaderAttempt: 4})},
			body: `{"id":1}`, ctype: "application/json",
			check: func(t *testing.T, q acemqtest.Queued) {
				if q.Headers["tenant"] != "acme" || q.Envelope.Attempt != 1 {
					t.Errorf("tenant %v, attempt %d; want acme, and attempt 1 stamped over the header", q.Headers["tenant"], q.Envelope.Attempt)
				}
			}},
		{name: "with an id", v: order{ID: 2}, opts: []acemqtest.PublishOption{acemqtest.WithID("order-2")}, body: `{"id":2}`, ctype: "application/json",
			check: func(t *testing.T, q acemqtest.Queued) {
				if q.Envelope.ID != "order-2" {
					t.Errorf("id %q", q.Envelope.ID)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mux := acceptMux("orders")
			ts := acemqtest.NewServer(t, mux, nil)
			// To the dead-letter queue, which nobody consumes: it stays there to be looked at.
			res := ts.Publish(t, "orders.dlq", tc.v, tc.opts...)
			got := ts.DeadLetters("orders")
			if len(got) != 1 {
				t.Fatalf("orders.dlq holds %d messages", len(got))
			}
			q := got[0]
			if string(q.Body) != tc.body || q.ContentType != tc.ctype || q.Envelope.ID != res.ID || !res.Routed {
				t.Errorf("body %q content type %q id %q (published %+v); want %q %q", q.Body, q.ContentType, q.Envelope.ID, res, tc.body, tc.ctype)
			}
			if tc.check != nil {
				tc.check(t, q)
			}
		})
	}
}

func TestPublishFails(t *testing.T) {
	t.Parallel()
	mux := acceptMux("orders")
	for _, tc := range []struct {
		name string
		key  string
		v    any
		opts []acemqtest.PublishOption
		want string
	}{
		{"to no queue", "ordres", []byte("x"), nil, "reached no queue"},
		{"what the codec cannot write", "orders", 7, []acemqtest.PublishOption{acemqtest.WithCodec(plainCodec{})}, "plain: not a string"},
		{"through an exchange with no binding", "orders", []byte("x"), []acemqtest.PublishOption{acemqtest.WithExchange("amq.topic")}, "reached no queue"},
		{"both a delay and a time", "orders", []byte("x"), []acemqtest.PublishOption{acemqtest.WithDelay(time.Hour), acemqtest.WithAt(memory.Epoch)}, "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tbtest.Failure(t, func(tb testing.TB) {
				ts := acemqtest.NewServer(tb, mux, nil)
				ts.Publish(tb, tc.key, tc.v, tc.opts...)
			})
			if !strings.Contains(got, tc.want) {
				t.Errorf("failed with %q, want it to say %q", got, tc.want)
			}
		})
	}
}

func TestPublishScheduled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opt  acemqtest.PublishOption
		want time.Duration
	}{
		{"with a delay", acemqtest.WithDelay(24 * time.Hour), 24 * time.Hour},
		{"at a time", acemqtest.WithAt(memory.Epoch.Add(90 * time.Minute)), 90 * time.Minute},
		{"at a time past", acemqtest.WithAt(memory.Epoch.Add(-time.Hour)), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts *acemqtest.Server
			mux, seen := scripted("reminders", func() transport.Clock { return ts.Broker.Clock() },
				func(*acemq.Message) ack.Ack { return ack.Accept() })
			ts = acemqtest.NewServer(t, mux, nil)
			ts.Publish(t, "reminders", "call ada", tc.opt)
			if took := ts.RunUntilIdle(t); took != tc.want {
				t.Errorf("RunUntilIdle moved the clock %v, want %v", took, tc.want)
			}
			if got := seen.all(); len(got) != 1 || got[0].at != tc.want {
				t.Errorf("handled %+v, want once at %v", got, tc.want)
			}
		})
	}
}
