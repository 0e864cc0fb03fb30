package acemq_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
)

// TestBeforeDeadLetter: what a handler asks to run before its dead letter
// runs once the server gives up on the message, before the dead letter is
// published, and sets headers on it, though not the library's own. While
// it fails the dead letter waits, the message held; once it succeeds the
// dead letter goes. A message that is retried, accepted or parked never
// runs it.
func TestBeforeDeadLetter(t *testing.T) {
	t.Parallel()
	var runs, failFirst atomic.Int64
	failFirst.Store(1)
	h := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		m.BeforeDeadLetter(func(ctx context.Context, reason string) (map[string]any, error) {
			runs.Add(1)
			if !strings.Contains(reason, "boom") {
				t.Errorf("the hook's reason %q does not name the handler's error", reason)
			}
			if failFirst.Add(-1) >= 0 {
				return nil, errors.New("the compensation queue is not there yet")
			}
			return map[string]any{"x-acemq-slip": "compensating", "x-acemq-error": "forged"}, nil
		})
		switch string(m.Body()) {
		case "park":
			return ack.Park(errors.New("set aside"))
		case "ok":
			return ack.Accept()
		}
		return ack.Retry(errors.New("boom")) // two attempts, then given up on
	})
	f := start(t, &acemq.Server{Retry: retry.Fixed(2, time.Second).WithJitter(0).WithBrokerWaitThreshold(time.Hour)},
		map[string]acemq.Handler{"orders": h})
	f.publish("orders", "ok", nil)
	f.publish("orders", "park", nil)
	f.eventually("the parked one parked", func() bool { return f.broker.Depth("orders.parked") == 1 })
	if n := runs.Load(); n != 0 {
		t.Fatalf("the hook ran %d times for an accepted and a parked message", n)
	}
	f.publish("orders", "doomed", nil)
	f.advance(1, time.Second) // its one retry, held in the process
	f.eventually("the hook run twice: refused, then done", func() bool { return runs.Load() == 2 })
	f.eventually("the dead letter published", func() bool { return f.broker.Depth("orders.dlq") == 1 })
	dl := f.only("orders.dlq")
	if dl.Headers["x-acemq-slip"] != "compensating" {
		t.Errorf("the dead letter's x-acemq-slip = %v, want the hook's", dl.Headers["x-acemq-slip"])
	}
	if got := dl.Headers["x-acemq-error"]; got == "forged" {
		t.Errorf("the hook overwrote x-acemq-error: %v", got)
	}
	if n := f.logs.FilterMessageSnippet("before the dead letter failed").Len(); n != 1 {
		t.Errorf("%d log lines for the hook's failure, want 1", n)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the hook ran %d times, want 2 (refused once, then done once)", n)
	}
}
