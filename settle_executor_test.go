package acemq_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// TestExecutorConclusions drives every conclusion of the one switch that
// ends an original once its copy's fate is known, with the faults injected
// by the memory broker's publish hook: no wrapper, no broker.
func TestExecutorConclusions(t *testing.T) {
	t.Parallel()
	deadLetter := func(m *acemq.Message) ack.Ack {
		if m.Envelope().Redelivered {
			return ack.Accept()
		}
		return ack.DeadLetter(errors.New("no such customer"))
	}
	tests := []struct {
		name   string
		policy retry.Policy
		answer func(*acemq.Message) ack.Ack
		// before runs once the server is up and before the message is
		// published: the fault to inject, or the queue to delete.
		before func(f *fixture)
		// then waits for the end state and checks it, counts included.
		then func(t *testing.T, f *fixture, h *recorder)
	}{
		{
			name: "routed: the copy is safe, the original acked", answer: deadLetter,
			then: func(t *testing.T, f *fixture, h *recorder) {
				f.only("q.dlq")
				f.eventually("original acked", func() bool { return f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
				wantCounts(t, f, 1, 0)
			},
		},
		{
			name: "unroutable rung: the wait is held in the process instead", policy: retry.Fixed(2, time.Minute),
			answer: func(m *acemq.Message) ack.Ack {
				if m.IsFirstAttempt() {
					return ack.Retry(errBoom)
				}
				return ack.Accept()
			},
			before: func(f *fixture) { f.broker.DeleteQueue("q.retry.1m") },
			then: func(t *testing.T, f *fixture, h *recorder) {
				f.eventually("attempt 1", func() bool { return h.count() == 1 })
				f.advance(1, time.Minute)
				f.eventually("attempt 2 accepted", func() bool { return h.count() == 2 && f.broker.Unacked("q") == 0 })
				f.counterReaches(acemq.MetricRungMissing, map[string]string{"rung": "q.retry.1m"}, 1)
			},
		},
		{
			name: "unroutable .dlq: held, the queue declared again, then placed", answer: deadLetter,
			before: func(f *fixture) { f.broker.DeleteQueue("q.dlq") },
			then: func(t *testing.T, f *fixture, h *recorder) {
				f.eventually("placed", func() bool { return f.broker.Depth("q.dlq") == 1 })
				f.eventually("original acked", func() bool { return f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
				wantCounts(t, f, 1, 1)
				f.counterReaches(acemq.MetricSetAsideFailed, map[string]string{"why": "missing", "destination": "q.dlq"}, 1)
			},
		},
		{
			name: "nacked then taken", answer: deadLetter,
			before: func(f *fixture) {
				f.broker.SetPublishFault(memory.FaultNext("q.dlq", memory.Nack, memory.Nack, memory.Nack))
			},
			then: func(t *testing.T, f *fixture, h *recorder) {
				f.only("q.dlq")
				f.eventually("original acked", func() bool { return f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
				wantCounts(t, f, 1, 0)
			},
		},
		{
			name: "nacked for good: held, not rejected, until the queue takes it", answer: deadLetter,
			before: func(f *fixture) { f.broker.SetPublishFault(memory.FaultEvery("q.dlq", memory.Nack)) },
			then: func(t *testing.T, f *fixture, h *recorder) {
				f.eventuallyWithin(10*time.Second, "held", func() bool {
					return f.counter(acemq.MetricHeld, map[string]string{"destination": "q.dlq", "why": "nacked"}) == 1
				})
				if f.broker.Unacked("q") != 1 || f.broker.Depth("q.dlq") != 0 {
					t.Fatalf("q unacked %d, q.dlq %d: want the original held", f.broker.Unacked("q"), f.broker.Depth("q.dlq"))
				}
				f.broker.SetPublishFault(nil) // the queue has room again
				f.eventuallyWithin(10*time.Second, "placed", func() bool { return f.broker.Depth("q.dlq") == 1 })
				f.eventually("original acked, nothing held", func() bool {
					return f.broker.Unacked("q")+f.broker.Depth("q") == 0 && f.counter(acemq.MetricHeld, nil) == 0
				})
				wantCounts(t, f, 1, 1)
				if h.count() != 1 {
					t.Errorf("handled %d times, want 1", h.count())
				}
			},
		},
		{
			name: "blocked, then the alarm clears", answer: deadLetter,
			before: func(f *fixture) {
				f.broker.SetPublishFault(memory.FaultNext("q.dlq", memory.Block, memory.Block, memory.Block, memory.Block))
			},
			then: func(t *testing.T, f *fixture, h *recorder) {
				f.only("q.dlq")
				f.eventually("original acked", func() bool { return f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
				wantCounts(t, f, 1, 0)
			},
		},
		{
			name: "unknown, the copy lost: the original goes back", answer: deadLetter,
			before: func(f *fixture) { f.broker.SetPublishFault(memory.FaultNext("q.dlq", memory.Drop)) },
			then: func(t *testing.T, f *fixture, h *recorder) {
				f.eventually("redelivered and accepted", func() bool { return h.count() == 2 && f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
				if n := f.broker.Depth("q.dlq"); n != 0 {
					t.Errorf("q.dlq holds %d", n)
				}
				wantCounts(t, f, 0, 0)
			},
		},
		{
			name:   "unknown, the copy arrived: a duplicate, never a loss",
			answer: func(*acemq.Message) ack.Ack { return ack.DeadLetter(errors.New("no such customer")) },
			before: func(f *fixture) { f.broker.SetPublishFault(memory.FaultNext("q.dlq", memory.LoseConfirm)) },
			then: func(t *testing.T, f *fixture, h *recorder) {
				f.eventually("two copies in q.dlq", func() bool { return f.broker.Depth("q.dlq") == 2 })
				f.counterReaches(acemq.MetricUnconfirmed, map[string]string{"destination": "q.dlq"}, 1) // the duplicate, counted
				f.eventually("original acked", func() bool { return f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
				if h.count() != 2 {
					t.Errorf("handled %d times, want 2", h.count())
				}
				wantCounts(t, f, 1, 0)
			},
		},
		{
			name: "in-process retry nacked then taken", policy: retry.Fixed(2, time.Second).WithJitter(0),
			answer: func(m *acemq.Message) ack.Ack {
				if m.IsFirstAttempt() {
					return ack.Retry(errBoom)
				}
				return ack.Accept()
			},
			then: func(t *testing.T, f *fixture, h *recorder) {
				f.eventually("attempt 1", func() bool { return h.count() == 1 })
				f.broker.SetPublishFault(memory.FaultNext("q", memory.Nack))
				f.advance(1, time.Second)
				f.eventually("attempt 2 accepted", func() bool { return h.count() == 2 && f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
				if env := h.envelopes()[1]; env.Attempt != 2 {
					t.Errorf("attempt %d, want 2", env.Attempt)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := &recorder{answer: tt.answer}
			f := start(t, &acemq.Server{Retry: tt.policy}, map[string]acemq.Handler{"q": h})
			if tt.before != nil {
				tt.before(f)
			}
			f.publish("q", "{}", nil)
			tt.then(t, f, h)
		})
	}
}

// TestExecutorCutByShutdown: a copy held because the broker blocks
// publishes is cut off by the shutdown deadline; its original goes back to
// the broker for another instance, and nothing reaches q.dlq.
func TestExecutorCutByShutdown(t *testing.T) {
	t.Parallel()
	h := always(ack.DeadLetter(errors.New("no such customer")))
	f := start(t, &acemq.Server{}, map[string]acemq.Handler{"q": h})
	f.broker.SetPublishFault(memory.FaultEvery("q.dlq", memory.Block))
	f.publish("q", "{}", nil)
	f.eventually("held", func() bool { return h.count() == 1 && f.broker.Unacked("q") == 1 })
	shutdownErr, runErr := f.stop(200 * time.Millisecond)
	if shutdownErr != nil || runErr != nil {
		t.Errorf("Shutdown = %v, Run = %v: no handler was cut off", shutdownErr, runErr)
	}
	if f.broker.Depth("q") != 1 || f.broker.Unacked("q") != 0 || f.broker.Depth("q.dlq") != 0 {
		t.Errorf("q ready %d unacked %d, q.dlq %d; want the original back in q", f.broker.Depth("q"), f.broker.Unacked("q"), f.broker.Depth("q.dlq"))
	}
}

// wantCounts checks the dead-lettered and set-aside-failed counters.
func wantCounts(t *testing.T, f *fixture, deadLettered, failed int64) {
	t.Helper()
	if got := f.counter(acemq.MetricDeadLettered, nil); got != deadLettered {
		t.Errorf("dead.lettered = %d, want %d", got, deadLettered)
	}
	if got := f.counter(acemq.MetricSetAsideFailed, nil); got != failed {
		t.Errorf("set.aside.failed = %d, want %d", got, failed)
	}
}

// TestExecutorUnwritableCopyIsParkedTrimmed: a message whose headers fill
// the frame cannot take the headers a dead letter adds; the copy is
// refused before a byte is written, and a trimmed copy is parked with a
// reason naming the limit. Nothing loops, and the next message is fine.
func TestExecutorUnwritableCopyIsParkedTrimmed(t *testing.T) {
	t.Parallel()
	h := always(ack.DeadLetter(errors.New("no such customer")))
	f := start(t, &acemq.Server{}, map[string]acemq.Handler{"q": h})
	ctx := context.Background()
	// The largest header that still fits, found on a scratch queue.
	if err := f.conn.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: "scratch", Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	fits := func(n int) bool {
		_, err := f.conn.Publish(ctx, transport.Publishing{RoutingKey: "scratch", Headers: map[string]any{"blob": strings.Repeat("x", n)}})
		return err == nil
	}
	n := sort.Search(memory.FrameMax, func(n int) bool { return !fits(n) }) - 1
	if _, err := f.conn.Publish(ctx, transport.Publishing{RoutingKey: "q", Headers: map[string]any{"blob": strings.Repeat("x", n)}, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	d := f.only("q.parked")
	env := acemq.EnvelopeOf(d)
	if !strings.HasPrefix(env.Error, "could not be written: headers is ") || !strings.Contains(env.Error, "instead of the handler rejected it: no such customer") {
		t.Errorf("reason %q", env.Error)
	}
	if _, ok := d.Headers["blob"]; ok || string(d.Body) != "{}" {
		t.Errorf("the parked copy kept the blob, or lost its body: %d headers, body %q", len(d.Headers), d.Body)
	}
	f.eventually("the original acked", func() bool { return f.broker.Unacked("q")+f.broker.Depth("q") == 0 })
	if h.count() != 1 || f.broker.Depth("q.dlq") != 0 {
		t.Errorf("handled %d times, q.dlq %d", h.count(), f.broker.Depth("q.dlq"))
	}
	f.counterReaches(acemq.MetricDeadLettered, map[string]string{"outcome": "unwritable"}, 1)
}
