package acemqtest_test

import (
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

// The broker's faults through Server.Broker: RunUntilIdle waits out, in
// real time, what the server does about them on the wall clock.
func TestFaults(t *testing.T) {
	t.Parallel()
	retryOnce := func(m *acemq.Message) ack.Ack {
		if m.Attempt() == 1 {
			return ack.Retry(errDown)
		}
		return ack.Accept()
	}
	for _, tc := range []struct {
		name   string
		fault  func(*memory.Broker)
		answer func(m *acemq.Message) ack.Ack
		calls  int
		dead   int
	}{
		{"a dead letter nacked once is published again", func(b *memory.Broker) {
			b.SetPublishFault(memory.FaultNext("orders.dlq", memory.Nack))
		}, func(*acemq.Message) ack.Ack { return ack.DeadLetter(errDown) }, 1, 1},
		{"a dead letter blocked twice waits for the alarm to clear", func(b *memory.Broker) {
			b.SetPublishFault(memory.FaultNext("orders.dlq", memory.Block, memory.Block))
		}, func(*acemq.Message) ack.Ack { return ack.DeadLetter(errDown) }, 1, 1},
		// The retry copy is enqueued but its confirm lost: the original goes
		// back too. A duplicate, never a loss.
		{"a retry whose confirm is lost runs twice", func(b *memory.Broker) {
			b.SetPublishFault(memory.FaultNext("orders", memory.LoseConfirm))
		}, retryOnce, 4, 0},
		// Dropped, and the original given back: attempt 1 runs again, and
		// its retry gets through.
		{"a retry dropped is tried again", func(b *memory.Broker) {
			b.SetPublishFault(memory.FaultNext("orders", memory.Drop))
		}, retryOnce, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts, seen := start(t, &acemq.Server{Retry: retry.Exponential(3, time.Second, time.Minute)}, tc.answer)
			ts.Publish(t, "orders", []byte("order 7"))
			tc.fault(ts.Broker) // after the test's own publish, before the server's: its retry waits for the clock
			ts.RunUntilIdle(t)
			if got := len(seen.all()); got != tc.calls {
				t.Errorf("handled %d times, want %d", got, tc.calls)
			}
			if got := len(ts.DeadLetters("orders")); got != tc.dead {
				t.Errorf("%d dead letters, want %d", got, tc.dead)
			}
		})
	}
}

func TestWithBroker(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, time.March, 14, 9, 0, 0, 0, time.UTC)
	ts, seen := start(t, nil, func(*acemq.Message) ack.Ack { return ack.Accept() },
		acemqtest.WithBroker(memory.WithClock(memory.NewClock(at))))
	ts.Publish(t, "orders", []byte("order 7"))
	ts.RunUntilIdle(t)
	if got := seen.all(); len(got) != 1 || got[0].at != at.Sub(memory.Epoch) {
		t.Errorf("handled %+v, want once at %v", got, at)
	}
	if now := ts.Server.Clock.Now(); !now.Equal(at) {
		t.Errorf("the server's clock reads %v", now)
	}
}
