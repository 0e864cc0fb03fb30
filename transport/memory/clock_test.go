package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq/transport/memory"
)

func TestClockFiresInDeadlineOrder(t *testing.T) {
	t.Parallel()
	c := memory.NewClock(memory.Epoch)
	late := c.After(3 * time.Second)
	early := c.After(time.Second)
	never := c.After(time.Hour)
	if c.Pending() != 3 {
		t.Fatalf("Pending = %d, want 3", c.Pending())
	}

	c.Advance(999 * time.Millisecond)
	select {
	case <-early:
		t.Fatal("fired before its deadline")
	default:
	}
	c.Advance(5 * time.Second)
	if got := <-early; !got.Equal(memory.Epoch.Add(time.Second)) {
		t.Errorf("early fired at %v, want its deadline", got)
	}
	if got := <-late; !got.Equal(memory.Epoch.Add(3 * time.Second)) {
		t.Errorf("late fired at %v, want its deadline", got)
	}
	if now := c.Now(); !now.Equal(memory.Epoch.Add(5999 * time.Millisecond)) {
		t.Errorf("Now = %v after advancing 5.999s", now)
	}
	if c.Pending() != 1 {
		t.Errorf("Pending = %d, want 1", c.Pending())
	}
	select {
	case <-never:
		t.Fatal("an hour passed early")
	default:
	}
}

func TestClockAfterZeroFiresAtOnce(t *testing.T) {
	t.Parallel()
	c := memory.NewClock(memory.Epoch)
	select {
	case got := <-c.After(0):
		if !got.Equal(memory.Epoch) {
			t.Errorf("fired at %v", got)
		}
	default:
		t.Fatal("After(0) did not fire at once")
	}
	if c.Pending() != 0 {
		t.Errorf("Pending = %d", c.Pending())
	}
	c.Advance(-time.Second) // time never goes back
	if !c.Now().Equal(memory.Epoch) {
		t.Errorf("Now = %v after a negative Advance", c.Now())
	}
}

// TestClockBlockUntil is the pattern a server test uses: wait until the
// code under test sleeps on the clock, then advance, without real sleeps.
func TestClockBlockUntil(t *testing.T) {
	t.Parallel()
	c := memory.NewClock(memory.Epoch)
	woke := make(chan time.Time)
	go func() { woke <- <-c.After(time.Minute) }()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.BlockUntil(ctx, 1); err != nil {
		t.Fatalf("BlockUntil: %v", err)
	}
	c.Advance(time.Minute)
	if got := <-woke; !got.Equal(memory.Epoch.Add(time.Minute)) {
		t.Errorf("woke at %v", got)
	}

	short, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if err := c.BlockUntil(short, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("BlockUntil with nobody waiting: %v, want the context's error", err)
	}
}

func TestNewClockZeroStartsAtEpoch(t *testing.T) {
	t.Parallel()
	if got := memory.NewClock(time.Time{}).Now(); !got.Equal(memory.Epoch) {
		t.Errorf("Now = %v, want Epoch", got)
	}
}

func TestRealClock(t *testing.T) {
	t.Parallel()
	c := memory.New(memory.WithRealClock()).Clock()
	before := time.Now()
	if now := c.Now(); now.Before(before) || now.Sub(before) > time.Second {
		t.Errorf("Now = %v, want about %v", now, before)
	}
	c.After(time.Hour)
	if c.Pending() != 1 {
		t.Errorf("Pending = %d, want 1", c.Pending())
	}
	ch := c.After(5 * time.Millisecond)
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("real After never fired")
	}
	start := time.Now()
	c.Advance(20 * time.Millisecond)
	if time.Since(start) < 20*time.Millisecond {
		t.Error("Advance on a real clock did not sleep")
	}
}
