package acemq_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

// TestRetryWaitInProcessWithinBrokerTimeout: a retry whose wait is held in
// the process holds its original unacknowledged, and a broker that takes
// deliveries back after 1 s takes it back in the middle of a 3 s wait and
// delivers it again. The copy waiting here is then not published (it would
// be a second message, and a second chain of retries: each take-back
// doubled the chain before), and once the timeout is learnt the next wait
// is cut short below it, so the ladder goes on instead of the message
// coming back at the same attempt forever. Counted: attempt 1 runs twice
// (the broker's redelivery), attempt 2 once, nothing dead-lettered.
func TestRetryWaitInProcessWithinBrokerTimeout(t *testing.T) {
	t.Parallel()
	seen := newCalls()
	h := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		seen.enter(strconv.Itoa(m.Attempt()))
		defer seen.leave(strconv.Itoa(m.Attempt()))
		if m.IsFirstAttempt() {
			return ack.Retry(errors.New("the warehouse is not answering"))
		}
		return ack.Accept()
	})
	inProcess := retry.Fixed(3, 3*time.Second).WithJitter(0).WithBrokerWaitThreshold(time.Hour)
	b := memory.New(memory.WithRealClock(), memory.WithConsumerTimeout(time.Second))
	f := startOn(t, b, &acemq.Server{Retry: inProcess}, map[string]acemq.Handler{"q": h})
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, f)
		}
	})
	f.publish("q", "order-1", nil)
	f.eventuallyWithin(30*time.Second, "attempt 2 accepted", func() bool {
		n, _ := seen.of("2")
		return n == 1 && b.Depth("q")+b.Unacked("q") == 0
	})
	if n, _ := seen.of("1"); n != 2 {
		t.Errorf("attempt 1 ran %d times, want twice: once, then once more as the broker delivered it again", n)
	}
	if n := f.logs.FilterMessageSnippet("the copy is not published").Len(); n != 1 {
		t.Errorf("%d logs of a copy not published after the take-back, want 1", n)
	}
	if n := f.logs.FilterMessageSnippet("cut short below it").Len(); n != 1 {
		t.Errorf("%d logs of a wait cut short, want 1", n)
	}
	// Time for a copy published late to arrive and run: none must.
	f.eventually("nothing set aside", func() bool { return b.Depth("q.dlq")+b.Depth("q.parked") == 0 })
	f.stop(5 * time.Second)
	if n, _ := seen.of("2"); n != 1 {
		t.Errorf("attempt 2 ran %d times, want once: a copy whose original the broker took back was published too", n)
	}
}
