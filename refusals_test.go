package acemq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// TestConnectionLimitWaitedOut: a consumer whose connection is closed
// while the broker's connection limit is reached is refused for now: Run
// goes on, CheckReady says not ready with the broker's words, every
// refusal is counted by queue and reason, the streak is logged once (not
// a line per try), and once the limit is lifted the server is ready again
// and every message is handled, the one held at the close included.
func TestConnectionLimitWaitedOut(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	handled := map[string]int{}
	f := start(t, &acemq.Server{}, map[string]acemq.Handler{
		"orders": acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
			mu.Lock()
			defer mu.Unlock()
			handled[string(m.Body())]++
			return ack.Accept()
		}),
	})
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(handled)
	}
	f.publish("orders", "before", nil)
	f.eventually("the first message handled", func() bool { return count() == 1 })

	f.broker.SetConnectionLimit(1) // only the server's Conn fits
	f.broker.CloseConnections()
	f.eventually("not ready", func() bool { return f.srv.CheckReady() != nil })
	err := f.srv.CheckReady()
	if !errors.Is(err, acemq.ErrNotReady) || !strings.Contains(err.Error(), "queue orders") ||
		!strings.Contains(err.Error(), "connection limit (1) is reached") {
		t.Fatalf("CheckReady while refused = %v, want not ready naming the queue and the broker's words", err)
	}
	f.publish("orders", "during", nil)
	f.broker.SetConnectionLimit(1) // another try, refused again
	f.broker.SetConnectionLimit(1)
	select {
	case err := <-f.runErr:
		t.Fatalf("Run returned while the broker refused the consumer's connection for now: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if n := f.counter(acemq.MetricRefusals, map[string]string{"queue": "orders", "reason": "connection_limit"}); n != 3 {
		t.Errorf("%s = %d, want 3 (one per refused try)", acemq.MetricRefusals, n)
	}
	if n := f.logs.FilterMessageSnippet("refuses the consumer's connection for now").Len(); n != 1 {
		t.Errorf("%d lines for the streak's start, want 1", n)
	}
	if count() != 1 {
		t.Fatalf("handled %v while the consumer was refused", handled)
	}

	f.broker.SetConnectionLimit(-1)
	f.eventually("ready again", func() bool { return f.srv.CheckReady() == nil })
	f.eventually("the message published during the refusal handled", func() bool { return count() == 2 })
	f.publish("orders", "after", nil)
	f.eventually("the message published after handled", func() bool { return count() == 3 })
	if f.logs.FilterMessageSnippet("accepts every consumer's connection again").Len() != 1 {
		t.Error("no line for the streak's end")
	}
}
