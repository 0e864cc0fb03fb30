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
		{"none has no waits", retry.None(), nil, nil},
		{"threshold moved down", retry.Exponential(4, s, 0).WithBrokerWaitThreshold(2 * s), []time.Duration{s, 2 * s, 4 * s}, []time.Duration{2 * s, 4 * s}},
		{"threshold zero: never the broker", retry.Fixed(3, 5*m).WithBrokerWaitThreshold(0), []time.Duration{5 * m, 5 * m}, nil},
		{"clamped attempts", retry.Exponential(-3, s, 0), nil, nil},
		{"on the delay queues: no rung", retry.Exponential(6, 10*s, 0).WithDelayQueues(true), []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []time.Duration
			for _, st := range tt.policy.Schedule() {
				got = append(got, st.Delay)
			}
			if !slices.Equal(got, tt.want) {
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
		{3, 0, retry.Wait{Delay: 40 * s, Where: retry.OnRung}, true},
		{5, 0, retry.Wait{Delay: 160 * s, Where: retry.OnRung}, true},
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

func TestMaxAge(t *testing.T) {
	t.Parallel()
	p := retry.Exponential(5, s, 0).WithMaxAge(6 * time.Hour)
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
		if w, _ := p.NextWait(3, 0); w.Delay != 40*s || w.Where != retry.OnRung {
			t.Fatalf("broker wait %v jittered or not on a rung", w)
		}
	}
	if !below || !above {
		t.Errorf("jitter moved delays one way only (below=%v above=%v)", below, above)
	}
}

// TestWhere: each wait of a schedule says where it is spent, and on the
// delay queues the waits over the threshold are jittered too, which a
// rung's fixed TTL cannot be.
func TestWhere(t *testing.T) {
	t.Parallel()
	rungs := retry.Exponential(4, 10*s, 0).WithJitter(0)
	want := []retry.Step{{10 * s, retry.InProcess}, {20 * s, retry.InProcess}, {40 * s, retry.OnRung}}
	if got := rungs.Schedule(); !slices.Equal(got, want) {
		t.Errorf("rungs: Schedule() = %v, want %v", got, want)
	}
	if rungs.UsesDelayQueues() {
		t.Error("a rung policy says it uses the delay queues")
	}
	delays := rungs.WithDelayQueues(true).WithJitter(0.5)
	if got := delays.Schedule()[2]; got != (retry.Step{Delay: 40 * s, Where: retry.OnDelayQueues}) {
		t.Errorf("delays: Schedule()[2] = %v", got)
	}
	if !delays.UsesDelayQueues() || len(delays.BrokerRungs()) != 0 {
		t.Errorf("delays: UsesDelayQueues %v, BrokerRungs %v", delays.UsesDelayQueues(), delays.BrokerRungs())
	}
	var moved bool
	for range 200 {
		w, _ := delays.NextWait(3, 0)
		if w.Where != retry.OnDelayQueues || w.Delay < 20*s || w.Delay > 60*s {
			t.Fatalf("NextWait(3) = %v, want 20s..60s on the delay queues", w)
		}
		moved = moved || w.Delay != 40*s
	}
	if !moved {
		t.Error("a wait on the delay queues was never jittered")
	}
	for _, tt := range []struct {
		p    retry.Policy
		d    time.Duration
		want retry.Where
	}{
		{rungs, 29 * s, retry.InProcess},
		{rungs, 30 * s, retry.OnDelayQueues}, // a chosen wait never goes on a rung
		{delays, 6 * time.Hour, retry.OnDelayQueues},
		{rungs.WithBrokerWaitThreshold(0), 6 * time.Hour, retry.InProcess},
	} {
		if got := tt.p.WaitFor(tt.d); got.Where != tt.want || got.Delay != tt.d {
			t.Errorf("WaitFor(%v) = %v, want %v", tt.d, got, tt.want)
		}
	}
	if retry.InProcess.String() != "process" || retry.OnDelayQueues.String() != "delay queues" {
		t.Errorf("names: %v %v", retry.InProcess, retry.OnDelayQueues)
	}
}

func TestSnoozeLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		p    retry.Policy
		want int
	}{
		{retry.Policy{}, retry.DefaultMaxSnoozes},
		{retry.Exponential(3, s, 0), retry.DefaultMaxSnoozes},
		{retry.Exponential(3, s, 0).WithMaxSnoozes(3), 3},
		{retry.Exponential(3, s, 0).WithMaxSnoozes(0), 0},
		{retry.Exponential(3, s, 0).WithMaxSnoozes(-2), 0},
	} {
		if got := tt.p.MaxSnoozes(); got != tt.want {
			t.Errorf("%+v: MaxSnoozes() = %d, want %d", tt.p, got, tt.want)
		}
	}
}

func TestPolicyIsAValue(t *testing.T) {
	t.Parallel()
	base := retry.Exponential(5, s, m)
	_ = base.WithMaxAge(time.Hour).WithJitter(0.5).WithBrokerWaitThreshold(0)
	if base.MaxAge() != 0 || base.Jitter() != retry.DefaultJitter || base.BrokerWaitThreshold() != retry.DefaultBrokerWaitThreshold {
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
	p := retry.Exponential(64, time.Second, 0).WithBrokerWaitThreshold(0)
	for attempt := 30; attempt < 64; attempt++ {
		for range 50 {
			if w, ok := p.NextWait(attempt, 0); !ok || w.Delay <= 0 {
				t.Fatalf("NextWait(%d) = %v, %v", attempt, w.Delay, ok)
			}
		}
	}
	for _, st := range retry.Exponential(100, time.Hour, 0).Schedule() {
		if st.Delay <= 0 {
			t.Fatalf("Schedule has %v", st)
		}
	}
}
