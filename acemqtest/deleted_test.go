package acemqtest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/polltest"
)

// TestRunUntilIdleQueueDeletedUnderAHandlerAsleep: a queue deleted while
// its handler sleeps on the virtual clock is declared again at once and
// consumed again once the handler returns. RunUntilIdle takes the server
// waiting for that handler as quiet, so it moves the clock, the handler
// returns, and the message published meanwhile is handled.
func TestRunUntilIdleQueueDeletedUnderAHandlerAsleep(t *testing.T) {
	t.Parallel()
	var ts *acemqtest.Server
	var handled atomic.Int64
	mux := acemq.NewMux()
	mux.HandleFunc("reports", func(ctx context.Context, m *acemq.Message) ack.Ack {
		if string(m.Body()) == `"long"` {
			select { // a long job, on the virtual clock
			case <-ts.Broker.Clock().After(10 * time.Minute):
			case <-ctx.Done():
			}
		}
		handled.Add(1)
		return ack.Accept()
	})
	ts = acemqtest.NewServer(t, mux, nil)
	ts.Publish(t, "reports", "long")
	polltest.Within(t, 30*time.Second, "the long handler asleep on the clock", func() bool { return ts.Broker.Clock().Pending() == 1 })
	ts.Broker.DeleteQueue("reports")
	polltest.Within(t, 30*time.Second, "reports declared again", func() bool {
		_, ok := ts.Broker.Queue("reports")
		return ok
	})
	ts.Publish(t, "reports", "short")
	ts.RunUntilIdle(t)
	if n := handled.Load(); n != 2 {
		t.Errorf("%d handled, want 2: the long one, and the short one published after the deletion", n)
	}
	if err := ts.Server.CheckReady(); err != nil {
		t.Errorf("CheckReady after RunUntilIdle: %v", err)
	}
}
