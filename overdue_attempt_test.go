package acemq_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
)

// TestOverdueIsOneAttempt: a handler ran past HandlerTimeout on attempt 1
// and its retry was placed; attempt 2, delivered again by the broker
// before it ran (the connection closed), is run, not dead-lettered as
// overdue: the mark is the attempt's that ran late, not the message's for
// good. (The RabbitMQ soak, seed 42, saw such dead letters beside
// "exhausted" ones.)
func TestOverdueIsOneAttempt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string][]int{}
	seen := func(id string) []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls[id])
	}
	release := make(chan struct{})
	h := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		mu.Lock()
		calls[m.ID()] = append(calls[m.ID()], m.Attempt())
		mu.Unlock()
		switch {
		case m.ID() == "blocker":
			<-release
			return ack.Accept()
		case m.Attempt() == 1:
			<-ctx.Done() // runs past the timeout, then honours its context
			return ack.Retry(ctx.Err())
		}
		return ack.Accept()
	})
	f := start(t, &acemq.Server{Concurrency: 1, Prefetch: 4, HandlerTimeout: 30 * time.Millisecond, Retry: retry.Fixed(3, time.Second).WithJitter(0)},
		map[string]acemq.Handler{"q": h})
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
	for _, id := range []string{"x", "blocker"} {
		if _, err := pub.Publish(context.Background(), acemq.Outgoing{ID: id, RoutingKey: "q", Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		if id == "x" {
			f.eventually("x's attempt 1 ran past its timeout and waits to retry", func() bool { return len(seen("x")) == 1 && f.broker.Clock().Pending() == 1 })
		}
	}
	f.eventually("the blocker holds the worker", func() bool { return len(seen("blocker")) == 1 })
	f.advance(1, time.Second)
	f.eventually("x's attempt 2 prefetched behind the blocker, attempt 1 acked", func() bool {
		return f.counter(acemq.MetricHandled, map[string]string{"outcome": "retry"}) == 1 && f.broker.Unacked("q") == 2 && f.broker.Depth("q") == 0
	})
	f.broker.CloseConnections() // both go back, and come again marked redelivered
	f.eventually("both delivered again", func() bool { return f.broker.Unacked("q") == 2 })
	close(release)
	f.eventually("x's attempt 2 run, or dead-lettered", func() bool {
		return slices.Contains(seen("x"), 2) || f.broker.Depth("q.dlq") > 0
	})
	for _, d := range f.broker.Peek("q.dlq") {
		t.Errorf("q.dlq: id %v attempt %v: %q", d.Headers[acemq.HeaderID], d.Headers[acemq.HeaderAttempt], d.Headers[acemq.HeaderError])
	}
	f.eventually("everything settled", func() bool { return f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
}
