package acemqtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/tbtest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// start runs a server on queue "orders" whose handler answers with answer,
// and returns it with what the handler was called with.
func start(t *testing.T, srv *acemq.Server, answer func(m *acemq.Message) ack.Ack, opts ...acemqtest.Option) (*acemqtest.Server, *calls) {
	t.Helper()
	var ts *acemqtest.Server
	mux, seen := scripted("orders", func() transport.Clock { return ts.Broker.Clock() }, answer)
	ts = acemqtest.NewServer(t, mux, srv, opts...)
	return ts, seen
}

func TestRunUntilIdle(t *testing.T) {
	t.Parallel()
	always := func(*acemq.Message) ack.Ack { return ack.Retry(errDown) }
	for _, tc := range []struct {
		name   string
		policy retry.Policy
		answer func(m *acemq.Message) ack.Ack
		calls  int // how many times the handler is called
		// The clock moves between min and max: jitter decides where.
		min, max time.Duration
		dlq      string // the dead letter's reason, "" for none
	}{
		{name: "accepted at once", policy: retry.Exponential(5, time.Second, time.Minute),
			answer: func(*acemq.Message) ack.Ack { return ack.Accept() }, calls: 1},
		{name: "dead-lettered at once", policy: retry.Exponential(5, time.Second, time.Minute),
			answer: func(*acemq.Message) ack.Ack { return ack.DeadLetter(errDown) }, calls: 1,
			dlq: "the handler rejected it: " + errDown.Error()},
		{name: "waits in the process, jittered", policy: retry.Exponential(5, time.Second, time.Minute),
			answer: always, calls: 5, min: 12 * time.Second, max: 18 * time.Second,
			dlq: "exhausted 5 attempts: " + errDown.Error()},
		{name: "waits on rungs", policy: retry.Exponential(4, 40*time.Second, time.Hour),
			answer: always, calls: 4, min: 280 * time.Second, max: 280 * time.Second,
			dlq: "exhausted 4 attempts: " + errDown.Error()},
		{name: "waits on the delay queues, jittered", policy: retry.Exponential(3, time.Hour, 0).WithDelayQueues(true),
			answer: always, calls: 3, min: 144 * time.Minute, max: 216 * time.Minute,
			dlq: "exhausted 3 attempts: " + errDown.Error()},
		{name: "accepted on the third attempt", policy: retry.Exponential(5, 20*time.Second, time.Hour),
			answer: func(m *acemq.Message) ack.Ack {
				if m.Attempt() < 3 {
					return ack.Retry(errDown)
				}
				return ack.Accept()
			}, calls: 3, min: 56 * time.Second, max: 64 * time.Second},
		{name: "a Retry-After and a snooze", policy: retry.Exponential(5, time.Second, time.Minute),
			answer: func(m *acemq.Message) ack.Ack {
				switch env := m.Envelope(); {
				case env.Snoozes == 0:
					return ack.Snooze(6 * time.Hour)
				case env.Attempt == 1:
					return ack.RetryAfter(17*time.Minute, errDown)
				}
				return ack.Accept()
			}, calls: 3, min: 6*time.Hour + 17*time.Minute, max: 6*time.Hour + 17*time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts, seen := start(t, &acemq.Server{Retry: tc.policy}, tc.answer)
			ts.Publish(t, "orders", []byte("order 7"))
			took := ts.RunUntilIdle(t)
			if took < tc.min || took > tc.max {
				t.Errorf("the clock moved %v, want %v to %v", took, tc.min, tc.max)
			}
			got := seen.all()
			if len(got) != tc.calls {
				t.Fatalf("handled %d times (%+v), want %d", len(got), got, tc.calls)
			}
			dead := ts.DeadLetters("orders")
			switch {
			case tc.dlq == "" && len(dead) != 0:
				t.Errorf("dead-lettered: %q", dead[0].Reason())
			case tc.dlq != "" && (len(dead) != 1 || dead[0].Reason() != tc.dlq):
				t.Errorf("dead letters %+v, want one with reason %q", dead, tc.dlq)
			}
			if n := ts.Broker.Unacked("orders") + ts.Broker.Depth("orders"); n != 0 {
				t.Errorf("%d messages left in orders once idle", n)
			}
		})
	}
}

func TestAdvanceFiresWaitsBegunOnTheWay(t *testing.T) {
	t.Parallel()
	ts, seen := start(t, &acemq.Server{Retry: retry.Exponential(4, time.Second, time.Minute).WithJitter(0)},
		func(*acemq.Message) ack.Ack { return ack.Retry(errDown) })
	ts.Publish(t, "orders", []byte("order 7"))
	for _, tc := range []struct {
		by    time.Duration
		calls int
	}{
		{0, 1}, // handled, the 1s wait begins
		{999 * time.Millisecond, 1},
		{2 * time.Millisecond, 2},    // 1s: attempt 2; its 2s wait begins
		{2001 * time.Millisecond, 3}, // 3s: attempt 3, then the 4s wait begins: 7s
		{4 * time.Second, 4},         // 7s: the last, dead-lettered
		{time.Hour, 4},
	} {
		ts.Advance(t, tc.by)
		if got := len(seen.all()); got != tc.calls {
			t.Fatalf("after %v more: %d calls, want %d", tc.by, got, tc.calls)
		}
	}
	want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second}
	for i, c := range seen.all() {
		if c.at != want[i] {
			t.Errorf("attempt %d at %v, want %v", c.attempt, c.at, want[i])
		}
	}
	if got := len(ts.DeadLetters("orders")); got != 1 {
		t.Errorf("%d dead letters", got)
	}
}

func TestAdvanceOneStepFiresAChain(t *testing.T) {
	t.Parallel()
	ts, seen := start(t, &acemq.Server{Retry: retry.Exponential(4, time.Second, time.Minute).WithJitter(0)},
		func(*acemq.Message) ack.Ack { return ack.Retry(errDown) })
	ts.Publish(t, "orders", []byte("order 7"))
	ts.Advance(t, 7*time.Second) // 1s, 2s and 4s: each wait begins as the one before it ends
	if got := len(seen.all()); got != 4 {
		t.Fatalf("%d calls, want all 4 within 7s", got)
	}
}

func TestAwaitTheRung(t *testing.T) {
	t.Parallel()
	policy := retry.Exponential(5, 20*time.Second, time.Hour)
	ts, seen := start(t, &acemq.Server{Retry: policy}, func(*acemq.Message) ack.Ack { return ack.Retry(errDown) })
	ts.Publish(t, "orders", []byte("order 7"))
	for i, step := range policy.Schedule() {
		if step.Where != retry.OnRung {
			continue
		}
		rung := retry.RungName("orders", step.Delay)
		got := ts.Await(t, rung, 1)
		if got[0].Envelope.Attempt != i+2 {
			t.Errorf("%s holds attempt %d, want %d", rung, got[0].Envelope.Attempt, i+2)
		}
		if n := len(seen.all()); n != i+1 {
			t.Errorf("on %s after %d calls, want %d", rung, n, i+1)
		}
	}
	if got := ts.Await(t, acemq.DeadLetterQueue("orders"), 1); got[0].Reason() != "exhausted 5 attempts: "+errDown.Error() {
		t.Errorf("reason %q", got[0].Reason())
	}
}

func TestAwaitFailsOnceIdle(t *testing.T) {
	t.Parallel()
	got := tbtest.Failure(t, func(tb testing.TB) {
		ts := acemqtest.NewServer(tb, acceptMux("orders"), nil)
		ts.Publish(tb, "orders", []byte("order 7"))
		ts.Await(tb, "orders.dlq", 1)
	})
	if want := "orders.dlq holds 0 of the 1 messages awaited, and nothing is pending"; !strings.Contains(got, want) {
		t.Errorf("failed with %q, want %q", got, want)
	}
}
