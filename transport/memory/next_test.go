package memory_test

import (
	"testing"
	"time"

	"github.com/acemq/acemq/transport/memory"
)

func TestClockNext(t *testing.T) {
	for _, tc := range []struct {
		name string
		arm  func(f *fixture)
		want time.Duration // from Epoch; negative for none
	}{
		{"nothing pending", func(*fixture) {}, -1},
		{"an After", func(f *fixture) { f.b.Clock().After(3 * time.Second) }, 3 * time.Second},
		{"the earliest of two Afters", func(f *fixture) {
			f.b.Clock().After(time.Hour)
			f.b.Clock().After(time.Minute)
		}, time.Minute},
		{"a message's expiry", func(f *fixture) {
			f.queue("rung", map[string]any{"x-message-ttl": 40000})
			f.send("rung", "m")
		}, 40 * time.Second},
		{"an expiry before an After", func(f *fixture) {
			f.b.Clock().After(time.Hour)
			f.queue("rung", map[string]any{"x-message-ttl": 20000})
			f.send("rung", "m")
		}, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			tc.arm(f)
			at, ok := f.b.Clock().Next()
			if tc.want < 0 {
				if ok {
					t.Fatalf("Next = %v, true; want none", at)
				}
				return
			}
			if !ok || !at.Equal(memory.Epoch.Add(tc.want)) {
				t.Fatalf("Next = %v, %v; want Epoch+%v", at, ok, tc.want)
			}
		})
	}
}

func TestClockNextAfterAdvance(t *testing.T) {
	f := setup(t)
	c := f.b.Clock()
	c.After(time.Second)
	c.After(2 * time.Second)
	c.Advance(time.Second)
	if at, ok := c.Next(); !ok || !at.Equal(memory.Epoch.Add(2*time.Second)) {
		t.Fatalf("Next = %v, %v after the first fired", at, ok)
	}
	c.Advance(time.Second)
	if at, ok := c.Next(); ok {
		t.Fatalf("Next = %v once every timer fired", at)
	}
}

func TestRealClockHasNoNext(t *testing.T) {
	t.Parallel()
	b := memory.New(memory.WithRealClock())
	defer b.Close()
	if at, ok := b.Clock().Next(); ok {
		t.Fatalf("Next = %v on a real clock", at)
	}
}
