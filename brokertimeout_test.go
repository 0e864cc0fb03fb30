package acemq_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport/memory"
)

// calls counts a handler's calls by message body, and the most calls on
// one body at once.
type calls struct {
	mu      sync.Mutex
	n       map[string]int
	running map[string]int
	most    map[string]int
}

func newCalls() *calls {
	return &calls{n: map[string]int{}, running: map[string]int{}, most: map[string]int{}}
}

func (c *calls) enter(body string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[body]++
	c.running[body]++
	c.most[body] = max(c.most[body], c.running[body])
	return c.n[body]
}

func (c *calls) leave(body string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running[body]--
}

func (c *calls) of(body string) (n, most int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[body], c.most[body]
}

// reasonIn returns the x-acemq-error of the single message in queue.
func reasonIn(f *fixture, queue string) string {
	f.t.Helper()
	s, _ := f.only(queue).Headers["x-acemq-error"].(string)
	return s
}

// TestConsumerTimeoutLearntFromTheBroker: with the default HandlerTimeout
// (25 minutes) and a broker that takes deliveries back after 1 s, a
// handler that ignores its context is run once: the broker's close says
// its timeout, the server marks the handler overdue, and its redelivery is
// dead-lettered with consumer_timeout instead of run again (before, it
// ran again and again). The queue's handlers are capped at 500 ms from
// then on, logged once: a handler that honours its context now ends in
// time for its ack to count. The healthy messages beside it are each
// accepted.
func TestConsumerTimeoutLearntFromTheBroker(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	seen := newCalls()
	ctxEnded := make(chan time.Duration, 1)
	h := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		body := string(m.Body())
		seen.enter(body)
		defer seen.leave(body)
		switch body {
		case "slow": // deaf to its context, on purpose
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
		case "polite":
			began := time.Now()
			select {
			case <-ctx.Done():
				ctxEnded <- time.Since(began)
			case <-time.After(20 * time.Second):
			}
		}
		return ack.Accept()
	})
	b := memory.New(memory.WithRealClock(), memory.WithConsumerTimeout(time.Second))
	f := startOn(t, b, &acemq.Server{Concurrency: 4}, map[string]acemq.Handler{"q": h})
	t.Cleanup(free)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, f)
		}
	})
	healthy := []string{"a", "b", "c", "d", "e", "f"}
	for _, body := range healthy[:3] {
		f.publish("q", body, nil)
	}
	f.publish("q", "slow", nil)
	for _, body := range healthy[3:] {
		f.publish("q", body, nil)
	}
	f.eventuallyWithin(30*time.Second, "the slow message dead-lettered", func() bool { return b.Depth("q.dlq") == 1 })
	if r := reasonIn(f, "q.dlq"); !strings.Contains(r, "ran past its timeout of 1s") {
		t.Errorf("dead letter's reason %q, want one naming the broker's timeout of 1s", r)
	}
	if n, _ := seen.of("slow"); n != 1 {
		t.Errorf("the slow handler ran %d times, want once", n)
	}
	f.eventuallyWithin(30*time.Second, "every healthy message handled", func() bool {
		for _, body := range healthy {
			if n, _ := seen.of(body); n == 0 {
				return false
			}
		}
		return true
	})
	// The dead letter is in the .dlq once confirmed; its metric is recorded
	// as the original is settled, a moment later.
	f.eventually("the dead letter counted", func() bool {
		return f.counter(acemq.MetricDeadLettered, map[string]string{"outcome": "consumer_timeout"}) >= 1
	})
	f.counterReaches(acemq.MetricDeadLettered, map[string]string{"outcome": "consumer_timeout"}, 1)
	capped := f.logs.FilterMessageSnippet("below Server.HandlerTimeout").All()
	if len(capped) != 1 {
		t.Fatalf("%d cap logs, want 1: %v", len(capped), capped)
	}
	if c := capped[0].ContextMap(); c["cap"] != "500ms" || c["consumer_timeout"] != "1s" || c["queue"] != "q" {
		t.Errorf("cap log fields %v, want queue q, consumer_timeout 1s, cap 500ms", c)
	}

	f.publish("q", "polite", nil)
	select {
	case took := <-ctxEnded:
		t.Logf("the polite handler's context ended after %v", took)
	case <-time.After(10 * time.Second):
		t.Fatal("the polite handler's context did not end at the learnt cap")
	}
	f.eventually("the polite message acked in time", func() bool {
		n, _ := seen.of("polite")
		return n == 1 && b.Depth("q") == 0 && b.Unacked("q") <= 1 // the slow one's may still be held
	})
	free()
	f.eventually("every delivery settled", func() bool { return b.Depth("q")+b.Unacked("q") == 0 })
	if n, _ := seen.of("polite"); n != 1 {
		t.Errorf("the polite handler ran %d times, want once: its ack came before the broker's timeout", n)
	}
	f.eventually("the slow handler's late answer discarded", func() bool {
		return f.logs.FilterMessageSnippet("its answer is discarded").Len() >= 1
	})
	if n := f.logs.FilterMessageSnippet("below Server.HandlerTimeout").Len(); n != 1 {
		t.Errorf("%d cap logs at the end, want 1", n)
	}
}

// TestRedeliveryWaitsForItsRunningHandler: when the broker closes the
// channel for one slow handler, it takes back every delivery of that
// channel, the healthy one still running beside it included, and delivers
// it again at once. Its redelivery does not run beside its first handler:
// it waits for it, and runs once that one has returned (its answer is
// discarded: the broker had the message back). The slow one is
// dead-lettered as overdue.
func TestRedeliveryWaitsForItsRunningHandler(t *testing.T) {
	t.Parallel()
	releaseSlow, releaseYoung := make(chan struct{}), make(chan struct{})
	var slowOnce, youngOnce sync.Once
	freeSlow := func() { slowOnce.Do(func() { close(releaseSlow) }) }
	freeYoung := func() { youngOnce.Do(func() { close(releaseYoung) }) }
	youngStarted := make(chan struct{})
	seen := newCalls()
	h := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		body := string(m.Body())
		n := seen.enter(body)
		defer seen.leave(body)
		switch {
		case body == "slow":
			select {
			case <-releaseSlow:
			case <-time.After(20 * time.Second):
			}
		case body == "young" && n == 1:
			close(youngStarted)
			select {
			case <-releaseYoung:
			case <-time.After(20 * time.Second):
			}
		}
		return ack.Accept()
	})
	const timeout = 3 * time.Second
	b := memory.New(memory.WithRealClock(), memory.WithConsumerTimeout(timeout))
	f := startOn(t, b, &acemq.Server{Concurrency: 4}, map[string]acemq.Handler{"q": h})
	t.Cleanup(freeSlow)
	t.Cleanup(freeYoung)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, f)
		}
	})
	f.publish("q", "slow", nil)
	f.eventually("the slow handler running", func() bool { n, _ := seen.of("slow"); return n == 1 })
	// Young when the broker closes the channel: half the timeout younger
	// than the slow one (a handler that has run the broker's timeout is
	// overdue too, and its redelivery dead-lettered).
	time.Sleep(timeout / 2)
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "q", ID: "young-id", Body: []byte("young")}); err != nil {
		t.Fatal(err)
	}
	<-youngStarted
	f.eventuallyWithin(3*timeout, "the young message's redelivery waiting", func() bool {
		return f.logs.FilterMessageSnippet("it waits for that handler rather than run beside it").FilterField(zap.String("id", "young-id")).Len() >= 1
	})
	if n, _ := seen.of("young"); n != 1 {
		t.Fatalf("the young message's handler ran %d times while its first run was still running, want once", n)
	}
	freeYoung()
	f.eventuallyWithin(3*timeout, "the young message run again and settled", func() bool {
		n, _ := seen.of("young")
		return n == 2
	})
	f.eventuallyWithin(3*timeout, "the slow message dead-lettered", func() bool { return b.Depth("q.dlq") == 1 })
	freeSlow()
	f.eventually("every delivery settled", func() bool { return b.Depth("q")+b.Unacked("q") == 0 })
	if n, most := seen.of("young"); n != 2 || most != 1 {
		t.Errorf("the young message ran %d times, at most %d at once; want twice, one at a time", n, most)
	}
	if n, _ := seen.of("slow"); n != 1 {
		t.Errorf("the slow message ran %d times, want once", n)
	}
	if r := reasonIn(f, "q.dlq"); !strings.Contains(r, "ran past its timeout of 3s") {
		t.Errorf("dead letter's reason %q, want one naming the broker's timeout", r)
	}
}

// TestDeclaredConsumerTimeoutCaps: a queue declared with
// x-consumer-timeout tells the server the broker's timeout up front: a
// HandlerTimeout above it is warned of at start-up, and handlers end at
// the cap below it from the first message on. Below it, nothing is
// capped and the start-up log is not a warning.
func TestDeclaredConsumerTimeoutCaps(t *testing.T) {
	t.Parallel()
	ended := make(chan struct{}, 1)
	h := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		select {
		case <-ctx.Done():
			ended <- struct{}{}
		case <-time.After(20 * time.Second):
		}
		return ack.Accept()
	})
	f := start(t, &acemq.Server{Queues: map[string]acemq.QueueConfig{"q": {Args: map[string]any{"x-consumer-timeout": int64(1000)}}}},
		map[string]acemq.Handler{"q": h})
	warned := f.logs.FilterMessageSnippet("below Server.HandlerTimeout").All()
	if len(warned) != 1 || warned[0].ContextMap()["from"] != "the queue's x-consumer-timeout argument" || warned[0].ContextMap()["cap"] != "500ms" {
		t.Fatalf("start-up warnings %v, want one naming x-consumer-timeout and a cap of 500ms", warned)
	}
	f.publish("q", "{}", nil)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context did not end at the cap below x-consumer-timeout")
	}

	below := start(t, &acemq.Server{HandlerTimeout: time.Second, Queues: map[string]acemq.QueueConfig{"q": {Args: map[string]any{"x-consumer-timeout": 60000}}}},
		map[string]acemq.Handler{"q": h})
	if n := below.logs.FilterMessageSnippet("below Server.HandlerTimeout").Len(); n != 0 {
		t.Errorf("%d cap warnings with HandlerTimeout below the queue's timeout, want none", n)
	}
	if n := below.logs.FilterMessageSnippet("HandlerTimeout is below it").Len(); n != 1 {
		t.Errorf("%d notes of the learnt timeout, want 1", n)
	}
}

// dumpLogs logs what the server logged, for a test that failed.
func dumpLogs(t *testing.T, f *fixture) {
	for _, e := range f.logs.All() {
		t.Logf("%s %s %v", e.Level, e.Message, e.ContextMap())
	}
}
