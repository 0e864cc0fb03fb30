package flow_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/acemq/acemq/internal/flow"
)

func newGroup(t *testing.T, n int) *flow.Group {
	t.Helper()
	g, err := flow.NewGroup("warehouse", n)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGroupCap(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 3)
	for i := range 3 {
		if !g.TryAcquire() {
			t.Fatalf("slot %d of 3 refused", i+1)
		}
	}
	if g.TryAcquire() {
		t.Fatal("a fourth slot of 3")
	}
	if g.InUse() != 3 || g.Cap() != 3 || g.Name() != "warehouse" {
		t.Errorf("InUse %d Cap %d Name %q", g.InUse(), g.Cap(), g.Name())
	}
	g.Release()
	if !g.TryAcquire() {
		t.Error("no slot after a release")
	}
}

func TestGroupAcquireWaitsForARelease(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 1)
	if err := g.Acquire(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Acquire(t.Context(), nil) }()
	select {
	case err := <-done:
		t.Fatalf("a second Acquire of one slot returned %v before a release", err)
	default:
	}
	g.Release()
	if err := <-done; err != nil {
		t.Fatalf("Acquire after the release: %v", err)
	}
	if g.InUse() != 1 {
		t.Errorf("InUse %d, want 1", g.InUse())
	}
}

func TestGroupAcquireCancelled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		end  func(cancel context.CancelFunc, stop chan struct{})
		want error
	}{
		{"by the context", func(cancel context.CancelFunc, _ chan struct{}) { cancel() }, context.Canceled},
		{"by the stop", func(_ context.CancelFunc, stop chan struct{}) { close(stop) }, flow.ErrStopped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newGroup(t, 1)
			g.TryAcquire()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			stop := make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- g.Acquire(ctx, stop) }()
			tt.end(cancel, stop)
			if err := <-done; !errors.Is(err, tt.want) {
				t.Fatalf("Acquire: %v, want %v", err, tt.want)
			}
			if g.InUse() != 1 {
				t.Errorf("InUse %d after a cancelled wait, want 1: the wait took a slot", g.InUse())
			}
		})
	}
}

func TestGroupReleaseWithoutAcquirePanics(t *testing.T) {
	t.Parallel()
	g := newGroup(t, 2)
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, "never taken (warehouse)") {
			t.Errorf("recovered %v, want a panic naming the group", r)
		}
	}()
	g.Release()
}

// Many handlers across queues: never more than the cap at once, and the
// cap is reached.
func TestGroupConcurrent(t *testing.T) {
	t.Parallel()
	const slots = 3
	g := newGroup(t, slots)
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 200 {
				if err := g.Acquire(t.Context(), nil); err != nil {
					t.Error(err)
					return
				}
				n := running.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				runtime.Gosched()
				running.Add(-1)
				g.Release()
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > slots || m < 2 {
		t.Errorf("at most %d at once, want 2 to %d", m, slots)
	}
	if g.InUse() != 0 {
		t.Errorf("InUse %d after every release", g.InUse())
	}
}

func TestGroupSettings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		n    int
		want string
	}{{"", 1, "no name"}, {"db", 0, `"db" of 0`}, {"db", -1, `"db" of -1`}} {
		_, err := flow.NewGroup(tt.name, tt.n)
		if !errors.Is(err, flow.ErrSettings) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewGroup(%q, %d): %v, want an ErrSettings naming %q", tt.name, tt.n, err, tt.want)
		}
	}
}

// TestGroupReleaseHandsTheSlotOn: a slot released while someone waits
// goes to that waiter at once: the group stays full and counts no waiter
// from the moment of the release, before the waiter has even run, so a
// test on a virtual clock never sees a free slot beside a waiter.
func TestGroupReleaseHandsTheSlotOn(t *testing.T) {
	g, err := flow.NewGroup("ledger", 1)
	if err != nil {
		t.Fatal(err)
	}
	if !g.TryAcquire() {
		t.Fatal("the first slot was not free")
	}
	done := make(chan error, 1)
	go func() { done <- g.Acquire(context.Background(), nil) }()
	for g.Waiting() != 1 {
		runtime.Gosched()
	}
	g.Release()
	if g.InUse() != 1 || g.Waiting() != 0 {
		t.Fatalf("after the release: %d in use, %d waiting; want the slot handed on (1, 0)", g.InUse(), g.Waiting())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	g.Release()
	if g.InUse() != 0 {
		t.Fatalf("%d in use after the last release", g.InUse())
	}
}
