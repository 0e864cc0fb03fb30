package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// theirClock is a transport.Clock of another making: it has only Now and
// After, behind which a virtual clock the test moves.
type theirClock struct{ inner *memory.Clock }

func (c theirClock) Now() time.Time                         { return c.inner.Now() }
func (c theirClock) After(d time.Duration) <-chan time.Time { return c.inner.After(d) }

// TestBrokerOnAClockOfAnotherMaking: a broker given any transport.Clock
// tells time by it, and its queues' expiries fire when that clock, not the
// broker's, is moved; Close ends the waits still pending (goleak checks).
func TestBrokerOnAClockOfAnotherMaking(t *testing.T) {
	inner := memory.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	f := setup(t, memory.WithClock(theirClock{inner}))
	if got := f.b.Clock().Now(); !got.Equal(inner.Now()) {
		t.Fatalf("the broker reads %v, its clock %v", got, inner.Now())
	}
	clocked, ok := transport.Transport(f.c).(transport.Clocked)
	if !ok || !clocked.Clock().Now().Equal(inner.Now()) {
		t.Fatal("the connection does not tell time by the clock given")
	}
	f.declare(transport.Topology{Queues: []transport.Queue{
		{Name: "wait", Durable: true, Args: map[string]any{"x-message-ttl": 1000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"}},
		{Name: "work", Durable: true},
		{Name: "left", Durable: true, Args: map[string]any{"x-message-ttl": 60000}},
	}})
	f.send("wait", "m")
	f.send("left", "pending at Close")
	// The expiry waits on the clock given: wait until it does, then move it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := inner.BlockUntil(ctx, 2); err != nil {
		t.Fatalf("the broker's expiries never waited on the clock given: %v", err)
	}
	inner.Advance(time.Second)
	polltest.Eventually(t, "the message expired into work", func() bool { return f.b.Depth("work") == 1 })
	if f.b.Depth("wait") != 0 || f.b.Depth("left") != 1 {
		t.Fatalf("wait %d, left %d; want 0 and 1", f.b.Depth("wait"), f.b.Depth("left"))
	}
}

// TestWithClockKeepsTheVirtualClockOnNil: a nil clock, of either kind, is
// no clock given.
func TestWithClockKeepsTheVirtualClockOnNil(t *testing.T) {
	t.Parallel()
	var none *memory.Clock
	for _, b := range []*memory.Broker{memory.New(memory.WithClock(nil)), memory.New(memory.WithClock(none))} {
		if b.Clock() == nil || !b.Clock().Now().Equal(memory.Epoch) {
			t.Errorf("the broker's clock is %v, want the virtual one at Epoch", b.Clock())
		}
		_ = b.Close()
	}
}
