package middleware_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
)

// calls counts the handler's calls and answers with a.
func calls(n *int, a ack.Ack) acemq.Handler {
	return acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { *n++; return a })
}

func TestDecodeParksBeforeTheHandler(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body    string
		outcome ack.Outcome
		calls   int
	}{
		{`{"id":1}`, ack.OutcomeAccept, 1},
		{`[1,2]`, ack.OutcomeAccept, 1},
		{``, ack.OutcomePark, 0},
		{`not json`, ack.OutcomePark, 0},
		{`{"id":1`, ack.OutcomePark, 0},
		{"\xff\xfe", ack.OutcomePark, 0},
	}
	for _, tt := range tests {
		var n int
		h := middleware.Decode(codec.JSON)(calls(&n, ack.Accept()))
		a := h.ServeMessage(context.Background(), acemq.NewMessage("q", []byte(tt.body), nil))
		if a.Outcome() != tt.outcome || n != tt.calls {
			t.Errorf("body %q: %v after %d calls; want %v after %d", tt.body, a, n, tt.outcome, tt.calls)
		}
		if tt.outcome == ack.OutcomePark && !strings.HasPrefix(a.Reason(), "could not be decoded: acemq: this message is not JSON") {
			t.Errorf("body %q: reason %q", tt.body, a.Reason())
		}
	}
}

// unvalidated is a codec without Validate, so Decode falls back to Unmarshal.
type unvalidated struct{ codec.Codec }

func TestDecodeWithoutValidator(t *testing.T) {
	t.Parallel()
	var n int
	h := middleware.Decode(unvalidated{codec.JSON})(calls(&n, ack.Accept()))
	if a := h.ServeMessage(context.Background(), acemq.NewMessage("q", []byte("{"), nil)); a.Outcome() != ack.OutcomePark || n != 0 {
		t.Errorf("got %v after %d calls", a, n)
	}
}

func TestMaxAge(t *testing.T) {
	t.Parallel()
	old := acemq.NewMessage("q", nil, map[string]any{"x-acemq-created": time.Now().Add(-2 * time.Hour).UnixMilli()})
	fresh := acemq.NewMessage("q", nil, nil)
	var n int
	h := middleware.MaxAge(time.Hour)(calls(&n, ack.Accept()))
	a := h.ServeMessage(context.Background(), old)
	if a.Outcome() != ack.OutcomeDeadLetter || !strings.HasPrefix(a.Reason(), "exceeded the maximum message age of 1h0m0s: acemq: the message is 2h") || n != 0 {
		t.Errorf("old message: %v after %d calls", a, n)
	}
	if a := h.ServeMessage(context.Background(), fresh); a.Outcome() != ack.OutcomeAccept || n != 1 {
		t.Errorf("fresh message: %v after %d calls", a, n)
	}
	if a := middleware.MaxAge(0)(calls(&n, ack.Accept())).ServeMessage(context.Background(), old); a.Outcome() != ack.OutcomeAccept {
		t.Errorf("MaxAge(0) must mean no limit: %v", a)
	}
}

func TestRecoverTurnsAPanicIntoARetry(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.ErrorLevel)
	h := middleware.Recover(middleware.WithLogger(zap.New(core)))(acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack {
		panic("nil map somewhere")
	}))
	a := h.ServeMessage(context.Background(), acemq.NewMessage("q", nil, map[string]any{"x-acemq-id": "p-1"}))
	var pe *middleware.PanicError
	if a.Outcome() != ack.OutcomeRetry || !errors.As(a.Err(), &pe) || pe.Value != "nil map somewhere" || len(pe.Stack) == 0 {
		t.Fatalf("got %v", a)
	}
	entries := logs.All()
	if len(entries) != 1 || entries[0].ContextMap()["id"] != "p-1" || entries[0].ContextMap()["stack"] == "" {
		t.Errorf("log entries %v", entries)
	}
	if a := middleware.Recover()(acemq.HandlerFunc(accept)).ServeMessage(context.Background(), acemq.NewMessage("q", nil, nil)); a.Outcome() != ack.OutcomeAccept {
		t.Errorf("no panic: %v", a)
	}
}

func TestTimeoutEndsTheHandlersContext(t *testing.T) {
	t.Parallel()
	h := middleware.Timeout(10 * time.Millisecond)(acemq.HandlerFunc(func(ctx context.Context, _ *acemq.Message) ack.Ack {
		<-ctx.Done()
		return ack.Retry(ctx.Err())
	}))
	a := h.ServeMessage(context.Background(), acemq.NewMessage("q", nil, nil))
	if a.Outcome() != ack.OutcomeRetry || !errors.Is(a.Err(), context.DeadlineExceeded) {
		t.Errorf("got %v", a)
	}
}

func accept(context.Context, *acemq.Message) ack.Ack { return ack.Accept() }

func TestLoggingLevelsByOutcome(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	m := acemq.NewMessage("orders", nil, map[string]any{"x-acemq-id": "id-7", "x-acemq-attempt": int64(2)})
	for _, a := range []ack.Ack{ack.Accept(), ack.Retry(errors.New("busy")), ack.DeadLetter(errors.New("no such customer"))} {
		var n int
		middleware.Logging(middleware.WithLogger(log))(calls(&n, a)).ServeMessage(context.Background(), m)
	}
	entries := logs.All()
	if len(entries) != 3 {
		t.Fatalf("%d log lines, want 3", len(entries))
	}
	wantLevels := []string{"debug", "info", "warn"}
	for i, e := range entries {
		fields := e.ContextMap()
		if e.Level.String() != wantLevels[i] || fields["queue"] != "orders" || fields["id"] != "id-7" || fields["attempt"] != int64(2) {
			t.Errorf("line %d: %s %v", i, e.Level, fields)
		}
	}
	if entries[2].ContextMap()["reason"] != "the handler rejected it: no such customer" {
		t.Errorf("dead letter line lacks the reason: %v", entries[2].ContextMap())
	}
}
