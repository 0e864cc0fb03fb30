package acemq_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/middleware"
)

func accept(context.Context, *acemq.Message) ack.Ack { return ack.Accept() }

func TestMuxRoutesByQueue(t *testing.T) {
	t.Parallel()
	mux := acemq.NewMux()
	var got []string
	mux.HandleFunc("a", func(_ context.Context, m *acemq.Message) ack.Ack {
		got = append(got, "a:"+m.Queue())
		return ack.Accept()
	})
	mux.HandleFunc("b", func(_ context.Context, m *acemq.Message) ack.Ack {
		got = append(got, "b:"+m.Queue())
		return ack.Accept()
	})
	ctx := context.Background()
	mux.ServeMessage(ctx, acemq.NewMessage("b", nil, nil))
	mux.ServeMessage(ctx, acemq.NewMessage("a", nil, nil))
	if strings.Join(got, ",") != "b:b,a:a" {
		t.Errorf("routed %v", got)
	}
	a := mux.ServeMessage(ctx, acemq.NewMessage("nobody", nil, nil))
	if a.Outcome() != ack.OutcomeDeadLetter || !strings.Contains(a.Reason(), `"nobody"`) {
		t.Errorf("unrouted message: %v", a)
	}
	if q := mux.Queues(); len(q) != 2 || q[0] != "a" || q[1] != "b" {
		t.Errorf("Queues() = %v", q)
	}
}

func TestChainOrderFirstIsOutermost(t *testing.T) {
	t.Parallel()
	var trace []string
	mw := func(name string) acemq.Middleware {
		return func(next acemq.Handler) acemq.Handler {
			return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
				trace = append(trace, name+">")
				a := next.ServeMessage(ctx, m)
				trace = append(trace, "<"+name)
				return a
			})
		}
	}
	mux := acemq.NewMux()
	mux.Use(mw("outer"), mw("middle"))
	mux.Handle("q", acemq.Chain(mw("inner"))(acemq.HandlerFunc(accept)))
	mux.ServeMessage(context.Background(), acemq.NewMessage("q", nil, nil))
	if got := strings.Join(trace, " "); got != "outer> middle> inner> <inner <middle <outer" {
		t.Errorf("order %s", got)
	}
}

func TestRegistrationMistakesPanic(t *testing.T) {
	t.Parallel()
	tests := map[string]func(mux *acemq.Mux){
		"duplicate queue": func(mux *acemq.Mux) { mux.HandleFunc("q", accept); mux.HandleFunc("q", accept) },
		"nil handler":     func(mux *acemq.Mux) { mux.Handle("q", nil) },
		"nil func":        func(mux *acemq.Mux) { mux.HandleFunc("q", nil) },
		"empty queue":     func(mux *acemq.Mux) { mux.HandleFunc("", accept) },
		"use after handle": func(mux *acemq.Mux) {
			mux.HandleFunc("q", accept)
			mux.Use(func(h acemq.Handler) acemq.Handler { return h })
		},
	}
	for name, register := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			register(acemq.NewMux())
		})
	}
}

func TestDecodedParksWhatItCannotRead(t *testing.T) {
	t.Parallel()
	type order struct {
		ID int `json:"id"`
	}
	var seen []int
	h := acemq.Decoded(jsonCodec, func(_ context.Context, _ *acemq.Message, o order) ack.Ack {
		seen = append(seen, o.ID)
		return ack.Accept()
	})
	ctx := context.Background()
	if a := h.ServeMessage(ctx, acemq.NewMessage("q", []byte(`{"id":7}`), nil)); a.Outcome() != ack.OutcomeAccept {
		t.Errorf("good body: %v", a)
	}
	for body, reason := range map[string]string{
		"":               "could not be decoded: acemq: this message is not JSON",
		"nope":           "could not be decoded: acemq: this message is not JSON",
		`{"id":"seven"}`: "could not be decoded: acemq: this message is JSON of the wrong shape",
	} {
		a := h.ServeMessage(ctx, acemq.NewMessage("q", []byte(body), nil))
		if a.Outcome() != ack.OutcomePark || !strings.HasPrefix(a.Reason(), reason) {
			t.Errorf("body %q: %v", body, a)
		}
	}
	if fmt.Sprint(seen) != "[7]" {
		t.Errorf("handler saw %v", seen)
	}
}

// tracer records the order middleware and handlers run in.
type tracer struct{ trace []string }

func (tr *tracer) mw(name string) acemq.Middleware {
	return func(next acemq.Handler) acemq.Handler {
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			tr.trace = append(tr.trace, name)
			return next.ServeMessage(ctx, m)
		})
	}
}

func (tr *tracer) handler(name string) acemq.Handler {
	return acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
		tr.trace = append(tr.trace, name)
		return ack.Accept()
	})
}

// TestMuxPerQueueMiddleware: With and Group give some queues middleware
// the others do not see, inside the root's own, and register into the
// root Mux (its Queues, its routing).
func TestMuxPerQueueMiddleware(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		register func(mux *acemq.Mux, tr *tracer)
		want     map[string]string // queue: what ran, in order
	}{
		{
			name: "With on one queue only",
			register: func(mux *acemq.Mux, tr *tracer) {
				mux.Use(tr.mw("root"))
				mux.With(tr.mw("a1"), tr.mw("a2")).Handle("a", tr.handler("A"))
				mux.Handle("b", tr.handler("B"))
			},
			want: map[string]string{"a": "root a1 a2 A", "b": "root B"},
		},
		{
			name: "With chained",
			register: func(mux *acemq.Mux, tr *tracer) {
				mux.With(tr.mw("x")).With(tr.mw("y")).Handle("a", tr.handler("A"))
			},
			want: map[string]string{"a": "x y A"},
		},
		{
			name: "Group with its own Use, after the root registered",
			register: func(mux *acemq.Mux, tr *tracer) {
				mux.Use(tr.mw("root"))
				mux.Handle("a", tr.handler("A"))
				mux.Group(func(g *acemq.Mux) {
					g.Use(tr.mw("g"))
					g.Handle("b", tr.handler("B"))
					g.With(tr.mw("w")).HandleFunc("c", func(context.Context, *acemq.Message) ack.Ack {
						tr.trace = append(tr.trace, "C")
						return ack.Accept()
					})
				})
				mux.Handle("d", tr.handler("D"))
			},
			want: map[string]string{"a": "root A", "b": "root g B", "c": "root g w C", "d": "root D"},
		},
		{
			name: "nested groups",
			register: func(mux *acemq.Mux, tr *tracer) {
				mux.Group(func(g *acemq.Mux) {
					g.Use(tr.mw("outer"))
					g.Group(func(h *acemq.Mux) {
						h.Use(tr.mw("inner"))
						h.Handle("a", tr.handler("A"))
					})
					g.Handle("b", tr.handler("B"))
				})
			},
			want: map[string]string{"a": "outer inner A", "b": "outer B"},
		},
		{
			name: "root Use after With, before any Handle, still applies",
			register: func(mux *acemq.Mux, tr *tracer) {
				sub := mux.With(tr.mw("sub"))
				mux.Use(tr.mw("root"))
				sub.Handle("a", tr.handler("A"))
			},
			want: map[string]string{"a": "root sub A"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mux, tr := acemq.NewMux(), &tracer{}
			tt.register(mux, tr)
			var queues []string
			for q := range tt.want {
				queues = append(queues, q)
			}
			slices.Sort(queues)
			if got := mux.Queues(); !slices.Equal(got, queues) {
				t.Errorf("Queues() = %v, want %v", got, queues)
			}
			for _, q := range queues {
				tr.trace = nil
				if a := mux.ServeMessage(context.Background(), acemq.NewMessage(q, nil, nil)); a.Outcome() != ack.OutcomeAccept {
					t.Errorf("queue %s: %v", q, a)
				}
				if got := strings.Join(tr.trace, " "); got != tt.want[q] {
					t.Errorf("queue %s ran %q, want %q", q, got, tt.want[q])
				}
			}
		})
	}
}

// TestMuxPerQueueRegistrationMistakesPanic: With and Group keep the Mux's
// rule that a mistake panics at registration, and a Group's Use is
// checked against its own handlers, not its parent's.
func TestMuxPerQueueRegistrationMistakesPanic(t *testing.T) {
	t.Parallel()
	nop := func(h acemq.Handler) acemq.Handler { return h }
	tests := map[string]struct {
		register func(mux *acemq.Mux)
		panics   string // "" for no panic
	}{
		"nil middleware in Use":  {func(mux *acemq.Mux) { mux.Use(nop, nil) }, "Mux.Use with a nil middleware (argument 2)"},
		"nil middleware in With": {func(mux *acemq.Mux) { mux.With(nil) }, "Mux.With with a nil middleware"},
		"nil Group function":     {func(mux *acemq.Mux) { mux.Group(nil) }, "Mux.Group with a nil function"},
		"duplicate across With": {func(mux *acemq.Mux) {
			mux.HandleFunc("q", accept)
			mux.With(nop).HandleFunc("q", accept)
		}, `Mux.Handle("q") registered twice`},
		"duplicate across groups": {func(mux *acemq.Mux) {
			mux.Group(func(g *acemq.Mux) { g.HandleFunc("q", accept) })
			mux.Group(func(g *acemq.Mux) { g.HandleFunc("q", accept) })
		}, `Mux.Handle("q") registered twice`},
		"root Use after a group's Handle": {func(mux *acemq.Mux) {
			mux.Group(func(g *acemq.Mux) { g.HandleFunc("q", accept) })
			mux.Use(nop)
		}, "Mux.Use after Handle"},
		"root Use after a With's Handle": {func(mux *acemq.Mux) {
			mux.With(nop).HandleFunc("q", accept)
			mux.Use(nop)
		}, "Mux.Use after Handle"},
		"group Use after its own Handle": {func(mux *acemq.Mux) {
			mux.Group(func(g *acemq.Mux) { g.HandleFunc("q", accept); g.Use(nop) })
		}, "Mux.Use after Handle"},
		"group Use after its parent's Handle is fine": {func(mux *acemq.Mux) {
			mux.HandleFunc("a", accept)
			mux.Group(func(g *acemq.Mux) { g.Use(nop); g.HandleFunc("b", accept) })
		}, ""},
		"middleware returning nil": {func(mux *acemq.Mux) {
			mux.With(func(acemq.Handler) acemq.Handler { return nil }).HandleFunc("q", accept)
		}, "a middleware returned a nil handler"},
		"Decoded with a nil middleware": {func(mux *acemq.Mux) {
			acemq.Decoded(jsonCodec, func(context.Context, *acemq.Message, int) ack.Ack { return ack.Accept() }, nil)
		}, "Decoded with a nil middleware"},
		"Decoded with a nil function": {func(mux *acemq.Mux) {
			acemq.Decoded[int](jsonCodec, nil)
		}, "Decoded with a nil function"},
		"Decoded with a nil codec": {func(mux *acemq.Mux) {
			acemq.Decoded(nil, func(context.Context, *acemq.Message, int) ack.Ack { return ack.Accept() })
		}, "Decoded with a nil codec"},
		"Decoded with a middleware returning nil": {func(mux *acemq.Mux) {
			acemq.Decoded(jsonCodec, func(context.Context, *acemq.Message, int) ack.Ack { return ack.Accept() },
				func(acemq.Handler) acemq.Handler { return nil })
		}, "a middleware returned a nil handler"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				r := recover()
				switch {
				case tt.panics == "" && r != nil:
					t.Errorf("panicked: %v", r)
				case tt.panics != "" && r == nil:
					t.Errorf("no panic, want one saying %q", tt.panics)
				case tt.panics != "" && !strings.Contains(fmt.Sprint(r), tt.panics):
					t.Errorf("panic %q, want it to say %q", r, tt.panics)
				}
			}()
			tt.register(acemq.NewMux())
		})
	}
}

// TestDecodedMiddlewareRunsAfterDecoding: a body that cannot be read is
// parked before the middleware runs; a readable one passes the middleware
// and reaches fn decoded, even through a middleware that drops the
// context it was given.
func TestDecodedMiddlewareRunsAfterDecoding(t *testing.T) {
	t.Parallel()
	type order struct {
		ID int `json:"id"`
	}
	tests := []struct {
		name    string
		body    string
		mw      func(tr *tracer) acemq.Middleware
		outcome ack.Outcome
		trace   string
	}{
		{"readable", `{"id":7}`, func(tr *tracer) acemq.Middleware { return tr.mw("mw") }, ack.OutcomeAccept, "mw fn:7"},
		{"unreadable", `<order/>`, func(tr *tracer) acemq.Middleware { return tr.mw("mw") }, ack.OutcomePark, ""},
		{"wrong shape", `{"id":"seven"}`, func(tr *tracer) acemq.Middleware { return tr.mw("mw") }, ack.OutcomePark, ""},
		{"middleware drops the context", `{"id":8}`, func(tr *tracer) acemq.Middleware {
			return func(next acemq.Handler) acemq.Handler {
				return acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
					tr.trace = append(tr.trace, "rude")
					return next.ServeMessage(context.Background(), m)
				})
			}
		}, ack.OutcomeAccept, "rude fn:8"},
		{"middleware answers itself", `{"id":9}`, func(tr *tracer) acemq.Middleware {
			return func(acemq.Handler) acemq.Handler {
				return acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
					tr.trace = append(tr.trace, "short")
					return ack.Requeue()
				})
			}
		}, ack.OutcomeRequeue, "short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := &tracer{}
			h := acemq.Decoded(jsonCodec, func(_ context.Context, _ *acemq.Message, o order) ack.Ack {
				tr.trace = append(tr.trace, fmt.Sprintf("fn:%d", o.ID))
				return ack.Accept()
			}, tt.mw(tr))
			a := h.ServeMessage(context.Background(), acemq.NewMessage("q", []byte(tt.body), nil))
			if a.Outcome() != tt.outcome {
				t.Errorf("outcome %v, want %v", a, tt.outcome)
			}
			if got := strings.Join(tr.trace, " "); got != tt.trace {
				t.Errorf("ran %q, want %q", got, tt.trace)
			}
		})
	}
}

// countingStore counts the claims an idempotency store is asked for.
type countingStore struct {
	idempotency.Store
	claims int
}

func (s *countingStore) Claim(ctx context.Context, id string) (idempotency.ClaimResult, error) {
	s.claims++
	return s.Store.Claim(ctx, id)
}

// TestIdempotentAfterDecoded: middleware.Idempotent placed inside Decoded
// claims only messages that could be read, and still stops the second
// delivery of one.
func TestIdempotentAfterDecoded(t *testing.T) {
	t.Parallel()
	store := &countingStore{Store: idempotency.NewMemory(time.Hour)}
	sent := 0
	mux := acemq.NewMux()
	mux.Handle("emails", acemq.Decoded(jsonCodec, func(_ context.Context, _ *acemq.Message, e struct{ To string }) ack.Ack {
		sent++
		return ack.Accept()
	}, middleware.Idempotent(store, middleware.WithLogger(zap.NewNop()))))
	ctx := context.Background()
	bad := acemq.NewMessage("emails", []byte(`not json`), map[string]any{acemq.HeaderID: "e-1"})
	if a := mux.ServeMessage(ctx, bad); a.Outcome() != ack.OutcomePark || store.claims != 0 {
		t.Errorf("unreadable body: %v, %d claims; want park and none", a, store.claims)
	}
	good := acemq.NewMessage("emails", []byte(`{"To":"a@example.com"}`), map[string]any{acemq.HeaderID: "e-2"})
	for range 2 {
		if a := mux.ServeMessage(ctx, good); a.Outcome() != ack.OutcomeAccept {
			t.Errorf("readable body: %v", a)
		}
	}
	if sent != 1 || store.claims != 2 {
		t.Errorf("sent %d times with %d claims; want once, two claims", sent, store.claims)
	}
}
