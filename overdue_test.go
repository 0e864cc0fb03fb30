package acemq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
)

// TestHandlerTimeoutEndsTheContext: a handler running past the server's
// HandlerTimeout sees its context end, and its retry follows the ladder;
// the next handler on the same worker gets a context of its own.
func TestHandlerTimeoutEndsTheContext(t *testing.T) {
	t.Parallel()
	h := &recorder{}
	slow := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		h.ServeMessage(ctx, m)
		if m.IsFirstAttempt() {
			<-ctx.Done() // a slow dependency that honours its context
			return ack.Retry(ctx.Err())
		}
		if ctx.Err() != nil {
			return ack.DeadLetter(errors.New("the next handler inherited an ended context"))
		}
		return ack.Accept()
	})
	h.answer = func(*acemq.Message) ack.Ack { return ack.Accept() }
	f := start(t, &acemq.Server{Concurrency: 1, HandlerTimeout: 30 * time.Millisecond, Retry: retry.Fixed(2, time.Second).WithJitter(0)},
		map[string]acemq.Handler{"q": slow})
	f.publish("q", "{}", nil)
	f.eventually("attempt 1 timed out and waits", func() bool { return h.count() == 1 && f.broker.Clock().Pending() == 1 })
	f.advance(1, time.Second)
	f.eventually("attempt 2 accepted", func() bool { return h.count() == 2 && f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
	if f.broker.Depth("q.dlq") != 0 {
		t.Error("the second attempt saw the first one's ended context")
	}
	if n := f.logs.FilterMessageSnippet("ran past the handler timeout").Len(); n != 1 {
		t.Errorf("%d timeout logs, want 1: %v", n, f.logs.All())
	}
}
