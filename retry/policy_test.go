package retry_test

import (
	"slices"
	"testing"
	"time"

	"github.com/acemq/acemq/retry"
)

const s, m = time.Second, time.Minute

func TestSchedule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy retry.Policy
		want   []time.Duration
		rungs  []time.Duration
	}{
		{"seed: exponential 6 from 10s", retry.Exponential(6, 10*s, 0), []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s}, []time.Duration{40 * s, 80 * s, 160 * s}},
		{"capped at max", retry.Exponential(5, s, 3*s), []time.Duration{s, 2 * s, 3 * s, 3 * s}, nil},
		{"fixed needs one rung for three waits", retry.Fixed(4, m), []time.Duration{m, m, m}, []time.Duration{m}},
		{".NET ladder 1s 2s 4s 8s", retry.Exponential(5, s, 5*m), []time.Duration{s, 2 * s, 4 * s, 8 * s}, nil},
		{"none has no waits", retry.None(), []time.Duration{}, nil},
		{"threshold moved down", retry.Exponential(4, s, 0).WaitInBrokerFrom(2 * s), []time.Duration{s, 2 * s, 4 * s}, []time.Duration{2 * s, 4 * s}},
		{"threshold zero: never the broker", retry.Fixed(3, 5*m).WaitInBrokerFrom(0), []time.Duration{5 * m, 5 * m}, nil},
		{"clamped attempts", retry.Exponential(-3, s, 0), []time.Duration{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.policy.Schedule(); !slices.Equal(got, tt.want) {
				t.Errorf("Schedule() = %v, want %v", got, tt.want)
			}
			if got := tt.policy.BrokerRungs(); !slices.Equal(got, tt.rungs) {
				t.Errorf("BrokerRungs() = %v, want %v", got, tt.rungs)
			}
		})
	}
}

func TestNextWait(t *testing.T) {
	t.Parallel()
	p := retry.Exponential(6, 10*s, 0).WithJitter(0)
	tests := []struct {
		attempt int
		age     time.Duration
		want    retry.Wait
		ok      bool
	}{
		{1, 0, retry.Wait{Delay: 10 * s}, true},
		{2, 0, retry.Wait{Delay: 20 * s}, true},
		{3, 0, retry.Wait{Delay: 40 * s, InBroker: true}, true},
		{5, 0, retry.Wait{Delay: 160 * s, InBroker: true}, true},
		{6, 0, retry.Wait{}, false},  // the sixth attempt was the last
		{60, 0, retry.Wait{}, false}, // a stray high attempt
		{0, 0, retry.Wait{Delay: 10 * s}, true},
		{-4, 0, retry.Wait{Delay: 10 * s}, true},
	}
	for _, tt := range tests {
		got, ok := p.NextWait(tt.attempt, tt.age)
		if got != tt.want || ok != tt.ok {
			t.Errorf("NextWait(%d, %v) = %v, %v; want %v, %v", tt.attempt, tt.age, got, ok, tt.want, tt.ok)
		}
	}
}

func TestGiveUpAfterAge(t *testing.T) {
	t.Parallel()
	p := retry.Exponential(5, s, 0).GiveUpAfter(6 * time.Hour)
	if _, ok := p.NextWait(1, 6*time.Hour); ok {
		t.Error("a message exactly at the maximum age got another attempt")
	}
	if _, ok := p.NextWait(1, 6*time.Hour-time.Millisecond); !ok {
		t.Error("a message under the maximum age was given up on")
	}
	if retry.Exponential(5, s, 0).TooOld(100 * 24 * time.Hour) {
		t.Error("max age 0 must mean never")
	}
}

func TestJitterIsTwoSidedAndInProcessOnly(t *testing.T) {
	t.Parallel()
	p := retry.Exponential(10, 10*s, 0) // 20% by default
	var below, above bool
	for range 2000 {
		w, _ := p.NextWait(1, 0)
		if w.Delay < 8*s || w.Delay > 12*s {
			t.Fatalf("jittered delay %v outside ±20%% of 10s", w.Delay)
		}
		below = below || w.Delay < 10*s
		above = above || w.Delay > 10*s
		if w, _ := p.NextWait(3, 0); w.Delay != 40*s || !w.InBroker {
			t.Fatalf("broker wait %v jittered or not on a rung", w)
		}
	}
	if !below || !above {
		t.Errorf("jitter moved delays one way only (below=%v above=%v)", below, above)
	}
}

func TestPolicyIsAValue(t *testing.T) {
	t.Parallel()
	base := retry.Exponential(5, s, m)
	_ = base.GiveUpAfter(time.Hour).WithJitter(0.5).WaitInBrokerFrom(0)
	if base.MaxAge() != 0 || base.Jitter() != retry.DefaultJitter || base.Threshold() != retry.DefaultBrokerWaitThreshold {
		t.Errorf("adjusting a copy changed the original: %+v", base)
	}
	if !(retry.Policy{}).IsZero() || retry.None().IsZero() {
		t.Error("the zero Policy must be 'not set', None() must be set")
	}
	if got := retry.None().MaxAttempts(); got != 1 {
		t.Errorf("None().MaxAttempts() = %d, want 1", got)
	}
}

// TestHugeDelaysNeverGoNegative: an uncapped exponential grows past
// time.Duration's range; with jitter on top the float must not overflow
// into a negative (instant) wait.
func TestHugeDelaysNeverGoNegative(t *testing.T) {
	t.Parallel()
	p := retry.Exponential(64, time.Second, 0).WaitInBrokerFrom(0)
	for attempt := 30; attempt < 64; attempt++ {
		for range 50 {
			if w, ok := p.NextWait(attempt, 0); !ok || w.Delay <= 0 {
				t.Fatalf("NextWait(%d) = %v, %v", attempt, w.Delay, ok)
			}
		}
	}
	for _, d := range retry.Exponential(100, time.Hour, 0).Schedule() {
		if d <= 0 {
			t.Fatalf("Schedule has %v", d)
		}
	}
}
