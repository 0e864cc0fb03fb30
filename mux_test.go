package acemq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
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
