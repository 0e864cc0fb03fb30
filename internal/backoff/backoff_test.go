package backoff_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq/acemq/internal/backoff"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Any transport.Clock is a backoff.Clock, and the other way round.
var (
	_ backoff.Clock   = transport.Clock(nil)
	_ transport.Clock = backoff.Clock(nil)
)

const maxDuration = time.Duration(math.MaxInt64)

func TestDelay(t *testing.T) {
	t.Parallel()
	reconnect := backoff.Policy{Min: 100 * time.Millisecond, Max: 10 * time.Second}
	tests := []struct {
		name string
		p    backoff.Policy
		n    int
		want time.Duration
	}{
		{"first", reconnect, 0, 100 * time.Millisecond},
		{"second", reconnect, 1, 200 * time.Millisecond},
		{"third", reconnect, 2, 400 * time.Millisecond},
		{"last below the cap", reconnect, 6, 6400 * time.Millisecond},
		{"capped", reconnect, 7, 10 * time.Second},
		{"large n", reconnect, 1 << 30, 10 * time.Second},
		{"largest n", reconnect, math.MaxInt, 10 * time.Second},
		{"negative n", reconnect, -3, 100 * time.Millisecond},
		{"the relay's numbers", backoff.Policy{Min: 1, Max: 10}, 3, 8},
		{"the relay's numbers, capped", backoff.Policy{Min: 1, Max: 10}, 4, 10},
		{"no overflow at the top bit", backoff.Policy{Min: 1, Max: maxDuration}, 62, 1 << 62},
		{"no overflow past the top bit", backoff.Policy{Min: 1, Max: maxDuration}, 63, maxDuration},
		{"no overflow far past it", backoff.Policy{Min: 3, Max: maxDuration}, 62, maxDuration},
		{"no overflow at the largest n", backoff.Policy{Min: time.Hour, Max: maxDuration}, math.MaxInt, maxDuration},
		{"zero Policy", backoff.Policy{}, 5, 100 * time.Millisecond},
		{"zero Min", backoff.Policy{Max: 10 * time.Second}, 3, 800 * time.Millisecond},
		{"negative Min", backoff.Policy{Min: -time.Second, Max: time.Second}, 1, 200 * time.Millisecond},
		{"Max below Min", backoff.Policy{Min: time.Second, Max: time.Millisecond}, 0, time.Second},
		{"Max below Min, later", backoff.Policy{Min: time.Second, Max: time.Millisecond}, 5, time.Second},
		{"zero Max", backoff.Policy{Min: time.Second}, 5, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.p.Delay(tt.n); got != tt.want {
				t.Errorf("%+v.Delay(%d) = %s, want %s", tt.p, tt.n, got, tt.want)
			}
		})
	}
}

func TestDelayJitter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    backoff.Policy
		n    int
		ceil time.Duration // the wait without jitter
	}{
		{"first", backoff.Policy{Min: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: true}, 0, 100 * time.Millisecond},
		{"doubled", backoff.Policy{Min: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: true}, 3, 800 * time.Millisecond},
		{"capped", backoff.Policy{Min: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: true}, 40, 10 * time.Second},
		{"odd", backoff.Policy{Min: 3, Max: 3, Jitter: true}, 0, 3},
		{"largest", backoff.Policy{Min: time.Hour, Max: maxDuration, Jitter: true}, 1 << 30, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			floor := tt.ceil - tt.ceil/2 // the upper half, rounded up: never zero
			lo, hi := maxDuration, time.Duration(0)
			for range 10_000 {
				d := tt.p.Delay(tt.n)
				if d < floor || d > tt.ceil {
					t.Fatalf("Delay(%d) = %s, want within [%s, %s]", tt.n, d, floor, tt.ceil)
				}
				lo, hi = min(lo, d), max(hi, d)
			}
			if lo == hi {
				t.Errorf("Delay(%d) was %s on every draw: not jittered", tt.n, lo)
			}
		})
	}
	if d := (backoff.Policy{Min: 1, Max: 1, Jitter: true}).Delay(0); d != 1 {
		t.Errorf("a jittered 1ns wait = %s, want 1ns: jitter must not make a wait zero", d)
	}
}

// waitOn starts p.Wait on clk and returns its result, once it has armed its
// timer.
func waitOn(ctx context.Context, tb testing.TB, clk *memory.Clock, p backoff.Policy, n int) <-chan error {
	tb.Helper()
	armed := clk.Pending() + 1
	done := make(chan error, 1)
	go func() { done <- p.Wait(ctx, clk, n) }()
	bctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(bctx, armed); err != nil {
		tb.Fatalf("Wait never armed a timer on the clock: %v", err)
	}
	return done
}

// result is the outcome of a Wait that must have returned by now; the
// timeout only keeps a broken Wait from hanging the run.
func result(tb testing.TB, done <-chan error) error {
	tb.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		tb.Fatal("Wait did not return")
		return nil
	}
}

func TestWaitOnVirtualClock(t *testing.T) {
	t.Parallel()
	clk := memory.NewClock(time.Time{})
	p := backoff.Policy{Min: time.Second, Max: time.Minute}
	start := clk.Now()
	done := waitOn(context.Background(), t, clk, p, 2)

	clk.Advance(4*time.Second - time.Nanosecond)
	if clk.Pending() != 1 {
		t.Fatalf("the wait's timer fired %s early", time.Nanosecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Wait returned (%v) before its delay had passed", err)
	default:
	}
	clk.Advance(time.Nanosecond)
	if err := result(t, done); err != nil {
		t.Fatalf("Wait = %v, want nil once the delay passed", err)
	}
	if got := clk.Now().Sub(start); got != 4*time.Second {
		t.Fatalf("Wait took %s of clock time, want Delay(2) = 4s", got)
	}
}

func TestWaitCancelled(t *testing.T) {
	t.Parallel()
	clk := memory.NewClock(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	done := waitOn(ctx, t, clk, backoff.Policy{Min: time.Hour}, 0)
	cancel()
	if err := result(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if !clk.Now().Equal(memory.Epoch) {
		t.Fatalf("the clock moved to %s", clk.Now())
	}
}

func TestWaitAlreadyCancelled(t *testing.T) {
	t.Parallel()
	clk := memory.NewClock(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (backoff.Policy{Min: time.Hour}).Wait(ctx, clk, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if clk.Pending() != 0 {
		t.Fatal("a Wait whose ctx had ended armed a timer")
	}
}

func TestSleepWoken(t *testing.T) {
	t.Parallel()
	clk := memory.NewClock(time.Time{})
	wake := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- backoff.Sleep(context.Background(), clk, time.Hour, wake) }()
	if err := clk.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	wake <- struct{}{}
	if err := result(t, done); !errors.Is(err, backoff.ErrWoken) {
		t.Fatalf("Sleep = %v, want ErrWoken", err)
	}
}

func TestSleepWallClock(t *testing.T) {
	t.Parallel()
	if err := backoff.Sleep(context.Background(), nil, time.Millisecond, nil); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
	// An hour's wait cut short by ctx returns at once; goleak in TestMain
	// checks that nothing of it is left behind.
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if err := (backoff.Policy{Min: time.Hour}).Wait(ctx, nil, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want context.DeadlineExceeded", err)
	}
}

func BenchmarkDelay(b *testing.B) {
	for _, bm := range []struct {
		name string
		p    backoff.Policy
	}{
		{"plain", backoff.Policy{Min: time.Second, Max: 5 * time.Minute}},
		{"jitter", backoff.Policy{Min: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: true}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				_ = bm.p.Delay(n & 15)
				n++
			}
		})
	}
}
