package idempotency

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq/transport/memory"
)

// TestWithClockFuncIsWithClock holds the old form of the clock option to
// the new: a lease ends at the same instant of the clock given either way.
func TestWithClockFuncIsWithClock(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]func(*memory.Clock) Option{
		"WithClock":     func(c *memory.Clock) Option { return WithClock(c) },
		"WithClockFunc": func(c *memory.Clock) Option { return WithClockFunc(c.Now) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := memory.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			s := NewMemory(time.Hour, WithLease(time.Minute), opt(clock))
			if got, err := s.Claim(ctx, "m-1"); err != nil || got != Claimed {
				t.Fatalf("first claim: %v, %v", got, err)
			}
			clock.Advance(time.Minute - time.Millisecond)
			if got, _ := s.Claim(ctx, "m-1"); got != InProgress {
				t.Fatalf("a millisecond before the lease ends: %v, want InProgress", got)
			}
			if left, err := s.LeaseLeft(ctx, "m-1"); err != nil || left != time.Millisecond {
				t.Errorf("LeaseLeft = %v, %v, want 1ms by the clock given", left, err)
			}
			clock.Advance(time.Millisecond)
			if got, _ := s.Claim(ctx, "m-1"); got != Claimed {
				t.Fatalf("once the lease ended by the clock given: %v, want Claimed", got)
			}
		})
	}
	if s := NewMemory(time.Hour, WithClock(nil)); s.now != nil {
		t.Error("WithClock(nil) set a clock; it should leave the store's own")
	}
}
