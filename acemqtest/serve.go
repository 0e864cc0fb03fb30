package acemqtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/panicked"
)

// Result is what one message came to: what the handler answered, and what
// the server does with that answer.
type Result struct {
	// Ack is the handler's answer; a panic reads as the server reads it,
	// a retry.
	Ack ack.Ack
	// Verdict is the settlement the server gives it: acknowledged, or a
	// copy to which queue, at which attempt, after which wait and where.
	Verdict acemq.Verdict
}

// Serve runs srv's handler on m and returns its answer and the verdict srv
// would give it, as rivertest's Worker.Work does for a job: at once, on
// the test's goroutine, with no broker, no server running and no clock to
// move. srv holds the handler and the settings that decide (Retry, Queues,
// NoDeclare); m is built with acemq.NewMessage, its headers giving the
// attempt (acemq.HeaderAttempt), creation time and snoozes the server
// would read. The decision is the server's own (acemq.Server.Decide), at
// srv.Clock's time or else the wall clock's, jitter included; the
// handler's context is ctx. Serve fails the test when srv's handler serves
// a fixed set of queues (a *acemq.Mux) without m's.
func Serve(ctx context.Context, tb testing.TB, srv *acemq.Server, m *acemq.Message) Result {
	tb.Helper()
	if srv == nil || srv.Handler == nil {
		tb.Fatal("acemqtest: Serve: the server has no handler")
	}
	if q, ok := srv.Handler.(interface{ Queues() []string }); ok && !slices.Contains(q.Queues(), m.Queue()) {
		tb.Fatalf("acemqtest: Serve: the handler serves no queue %q (it serves %q)", m.Queue(), q.Queues())
	}
	a := serve(ctx, srv.Handler, m)
	now := time.Now()
	if srv.Clock != nil {
		now = srv.Clock.Now()
	}
	return Result{Ack: a, Verdict: srv.Decide(m.Queue(), m.Envelope(), a, now)}
}

// serve calls h as the server does: a panic is a retry.
func serve(ctx context.Context, h acemq.Handler, m *acemq.Message) (a ack.Ack) {
	defer func() {
		if r := recover(); r != nil {
			a = panicked.Retry(r)
		}
	}()
	return h.ServeMessage(ctx, m)
}
