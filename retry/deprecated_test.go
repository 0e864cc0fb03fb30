package retry

import (
	"testing"
	"time"
)

// TestDeprecatedAdjustersAreTheirNewNames holds each old adjuster to the
// new one it stands for: the same policy out, for every base, so that code
// still on the old names behaves exactly as code on the new.
func TestDeprecatedAdjustersAreTheirNewNames(t *testing.T) {
	t.Parallel()
	bases := map[string]Policy{
		"zero":        {},
		"none":        None(),
		"fixed":       Fixed(3, time.Minute),
		"exponential": Exponential(6, time.Second, time.Hour).WithJitter(0.3),
		"on delays":   Exponential(4, time.Minute, 0).WithDelayQueues(true).WithMaxSnoozes(7),
	}
	for name, base := range bases {
		for _, tt := range []struct {
			adjuster string
			old, new Policy
		}{
			{"GiveUpAfter", base.GiveUpAfter(6 * time.Hour), base.WithMaxAge(6 * time.Hour)},
			{"GiveUpAfter negative", base.GiveUpAfter(-time.Second), base.WithMaxAge(-time.Second)},
			{"WaitInBrokerFrom", base.WaitInBrokerFrom(5 * time.Second), base.WithBrokerWaitThreshold(5 * time.Second)},
			{"WaitInBrokerFrom zero", base.WaitInBrokerFrom(0), base.WithBrokerWaitThreshold(0)},
			{"OnDelayQueues", base.OnDelayQueues(), base.WithDelayQueues(true)},
			{"SnoozeAtMost", base.SnoozeAtMost(3), base.WithMaxSnoozes(3)},
			{"SnoozeAtMost none", base.SnoozeAtMost(0), base.WithMaxSnoozes(0)},
		} {
			if tt.old != tt.new {
				t.Errorf("%s: %s gave %+v, its new name %+v", name, tt.adjuster, tt.old, tt.new)
			}
		}
		if base.Threshold() != base.BrokerWaitThreshold() {
			t.Errorf("%s: Threshold() = %v, BrokerWaitThreshold() = %v", name, base.Threshold(), base.BrokerWaitThreshold())
		}
	}
}

// TestSettingsReadBack: every WithX has its X, reading what was set.
func TestSettingsReadBack(t *testing.T) {
	t.Parallel()
	p := Exponential(5, time.Second, 0).WithMaxAge(time.Hour).WithBrokerWaitThreshold(2 * time.Second).
		WithDelayQueues(true).WithMaxSnoozes(4).WithJitter(0.1)
	if p.MaxAge() != time.Hour || p.BrokerWaitThreshold() != 2*time.Second || !p.DelayQueues() || p.MaxSnoozes() != 4 || p.Jitter() != 0.1 {
		t.Errorf("read back %v %v %v %v %v", p.MaxAge(), p.BrokerWaitThreshold(), p.DelayQueues(), p.MaxSnoozes(), p.Jitter())
	}
	if d := Exponential(5, time.Second, 0).DelayQueues(); d {
		t.Error("DelayQueues() is true by default; rungs are the default")
	}
	off := p.WithDelayQueues(false)
	if off.DelayQueues() || off.UsesDelayQueues() || len(off.BrokerRungs()) == 0 {
		t.Errorf("WithDelayQueues(false) left the delay queues on: %+v, rungs %v", off, off.BrokerRungs())
	}
	if !p.UsesDelayQueues() || len(p.BrokerRungs()) != 0 {
		t.Errorf("WithDelayQueues(true): uses them %v, rungs %v", p.UsesDelayQueues(), p.BrokerRungs())
	}
}
