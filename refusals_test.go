package acemq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport/memory"
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
	f.counterReaches(acemq.MetricRefusals, map[string]string{"queue": "orders", "reason": "connection_limit"}, 3)
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

// TestConnectionLimitAtStart: a Run whose first Consume is refused for now
// (the broker at its connection limit when the server starts) waits for
// room instead of returning, not ready meanwhile, saying why; once the
// limit is lifted it subscribes and handles messages.
func TestConnectionLimitAtStart(t *testing.T) {
	t.Parallel()
	broker := memory.New()
	conn := broker.Connect()
	t.Cleanup(func() { _ = conn.Close(); _ = broker.Close() })
	broker.SetConnectionLimit(1) // the Conn alone
	var handled atomic.Int64
	mux := acemq.NewMux()
	mux.HandleFunc("orders", func(context.Context, *acemq.Message) ack.Ack { handled.Add(1); return ack.Accept() })
	srv := &acemq.Server{Transport: conn, Handler: mux, Logger: zap.NewNop()}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-runErr
	})
	var ready error
	polltest.Eventually(t, "CheckReady says the broker refuses the consumer", func() bool {
		select {
		case err := <-runErr:
			t.Fatalf("Run returned while the broker refused its first consumer for now: %v", err)
		default:
		}
		ready = srv.CheckReady()
		return ready != nil && strings.Contains(ready.Error(), "connection limit (1) is reached")
	})
	if !strings.Contains(ready.Error(), "has not subscribed every queue yet") || !strings.Contains(ready.Error(), "queue orders") {
		t.Fatalf("CheckReady = %v, want it to say Run has not subscribed and why", ready)
	}
	broker.SetConnectionLimit(-1)
	select {
	case <-srv.Ready():
	case err := <-runErr:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not subscribed 10s after the limit was lifted")
	}
	pub := &acemq.Publisher{Transport: conn, Mandatory: true}
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "orders", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the message handled", func() bool { return handled.Load() > 0 })
	if err := srv.CheckReady(); err != nil {
		t.Errorf("CheckReady after the limit was lifted = %v", err)
	}
}
