package flow_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/transport/memory"
)

func newRate(t *testing.T, limit float64, burst int) (*flow.Rate, *memory.Clock) {
	t.Helper()
	clock := memory.NewClock(time.Time{})
	r, err := flow.NewRate(clock, limit, burst)
	if err != nil {
		t.Fatal(err)
	}
	return r, clock
}

func TestRateBurst(t *testing.T) {
	t.Parallel()
	r, clock := newRate(t, 10, 5)
	t0 := clock.Now()
	for i := range 5 {
		if ok, _ := r.Take(); !ok {
			t.Fatalf("token %d of a full burst of 5 refused", i+1)
		}
	}
	ok, next := r.Take()
	if ok || !next.Equal(t0.Add(100*time.Millisecond)) {
		t.Fatalf("sixth: %v, next %v; want refused until t0+100ms", ok, next.Sub(t0))
	}
	clock.Advance(99 * time.Millisecond)
	if ok, _ := r.Take(); ok {
		t.Fatal("a token 1ms early")
	}
	clock.Advance(time.Millisecond)
	if ok, _ := r.Take(); !ok {
		t.Fatal("no token when next said")
	}
	// An idle bucket fills to its burst and no further.
	clock.Advance(time.Hour)
	n := 0
	for {
		if ok, _ := r.Take(); !ok {
			break
		}
		n++
	}
	if n != 5 {
		t.Errorf("after an hour idle %d tokens at once, want the burst of 5", n)
	}
}

// Over a long run on virtual time the achieved rate is the limit, within
// 1%, whether the caller books with Reserve or asks again with Take; a
// limit that does not divide a second included.
func TestRateAccuracy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		limit float64
		burst int
	}{{100, 10}, {3, 1}, {7, 3}, {0.5, 2}, {12345, 100}}
	for _, tt := range tests {
		for _, how := range []string{"reserve", "take"} {
			r, clock := newRate(t, tt.limit, tt.burst)
			t0 := clock.Now()
			run := time.Duration(20000 / tt.limit * float64(time.Second)) // about 20000 tokens
			n := 0
			for {
				if how == "reserve" {
					res := r.Reserve()
					if res.At.Sub(t0) > run {
						break
					}
					if d := res.At.Sub(clock.Now()); d > 0 {
						clock.Advance(d)
					}
					n++
					continue
				}
				ok, next := r.Take()
				if ok {
					n++
					continue
				}
				if next.Sub(t0) > run {
					break
				}
				clock.Advance(next.Sub(clock.Now()))
			}
			elapsed := clock.Now().Sub(t0).Seconds()
			achieved := float64(n-tt.burst) / elapsed // the burst came at t0
			ratio := achieved / tt.limit
			t.Logf("%s %v/s burst %d: %d tokens in %.0fs of virtual time, %.6f of the limit", how, tt.limit, tt.burst, n, elapsed, ratio)
			if math.Abs(ratio-1) > 0.01 {
				t.Errorf("%s %v/s burst %d: %d tokens in %.0fs, %.4f of the limit", how, tt.limit, tt.burst, n, elapsed, ratio)
			}
		}
	}
}

// Two queues sharing one rate get the limit between them, not each.
func TestRateShared(t *testing.T) {
	t.Parallel()
	r, clock := newRate(t, 50, 1)
	t0 := clock.Now()
	got := [2]int{}
	for i := 0; clock.Now().Sub(t0) < 100*time.Second; i++ {
		q := i % 2
		res := r.Reserve()
		if d := res.At.Sub(clock.Now()); d > 0 {
			clock.Advance(d)
		}
		got[q]++
	}
	total := float64(got[0]+got[1]-1) / clock.Now().Sub(t0).Seconds()
	if math.Abs(total/50-1) > 0.01 || got[0]-got[1] > 1 || got[1]-got[0] > 1 {
		t.Errorf("shared: %v tokens, %.2f/s together; want 50/s split evenly", got, total)
	}
}

func TestRateReserveInOrder(t *testing.T) {
	t.Parallel()
	r, clock := newRate(t, 10, 2)
	t0 := clock.Now()
	var at []time.Duration
	for range 5 {
		at = append(at, r.Reserve().At.Sub(t0))
	}
	want := []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("reservations at %v, want %v", at, want)
		}
	}
	// A booking handed back before it is due goes to the next caller.
	r.Cancel(flow.Reservation{At: t0.Add(300 * time.Millisecond)})
	if got := r.Reserve().At.Sub(t0); got != 300*time.Millisecond {
		t.Errorf("after a cancel the next booking is at %v, want 300ms", got)
	}
	// One already due was spent: handing it back gives nothing.
	clock.Advance(time.Second)
	r.Cancel(flow.Reservation{At: t0})
	n := 0
	for {
		if ok, _ := r.Take(); !ok {
			break
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d tokens after handing back a spent booking, want the burst of 2", n)
	}
}

func TestRateWait(t *testing.T) {
	t.Parallel()
	r, clock := newRate(t, 1, 1)
	ctx := t.Context()
	if err := r.Wait(ctx); err != nil {
		t.Fatalf("first token: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Wait(ctx) }()
	if err := clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v before its token was due", err)
	default:
	}
	clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func TestRateWaitCancelled(t *testing.T) {
	t.Parallel()
	r, clock := newRate(t, 1, 1)
	t0 := clock.Now()
	r.Take()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Wait(ctx) }()
	if err := clock.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel: %v", err)
	}
	// The cancelled wait handed its booking back: the next is at t0+1s, not t0+2s.
	if got := r.Reserve().At.Sub(t0); got != time.Second {
		t.Errorf("next booking at %v, want 1s", got)
	}
	if err := r.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on an ended context: %v", err)
	}
	if got := r.Reserve().At.Sub(t0); got != 2*time.Second {
		t.Errorf("a Wait on an ended context booked a token: next at %v, want 2s", got)
	}
}

func TestRateSettings(t *testing.T) {
	t.Parallel()
	clock := memory.NewClock(time.Time{})
	r, err := flow.NewRate(clock, 2.5, 4)
	if err != nil || r.Limit() != 2.5 || r.Burst() != 4 {
		t.Fatalf("NewRate(2.5, 4): %v, %v", r, err)
	}
	bad := []struct {
		limit float64
		burst int
		want  string
	}{
		{0, 1, "rate of 0"}, {-1, 1, "rate of -1"}, {math.Inf(1), 1, "rate of +Inf"}, {math.NaN(), 1, "rate of NaN"},
		{2e9, 1, "more than one a nanosecond"}, {10, 0, "burst 0"}, {10, -3, "burst -3"},
	}
	for _, tt := range bad {
		_, err := flow.NewRate(clock, tt.limit, tt.burst)
		if !errors.Is(err, flow.ErrSettings) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewRate(%v, %d): %v, want an ErrSettings naming %q", tt.limit, tt.burst, err, tt.want)
		}
	}
	if _, err := flow.NewRate(nil, 1, 1); !errors.Is(err, flow.ErrSettings) {
		t.Errorf("no clock: %v", err)
	}
}
