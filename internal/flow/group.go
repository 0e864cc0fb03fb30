package flow

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// ErrStopped is what [Group.Acquire] returns when its stop channel closed
// before a slot was free.
var ErrStopped = errors.New("acemq: stopped while waiting for a slot")

// Group caps how many handlers run at once across the queues that share
// it (at most N for a named group: one database's connection budget, a
// partner's concurrent-request limit). A slot is taken before a handler
// starts and given back when it returns. Waiters are served in the order
// they came, and Release hands its slot straight to the first of them:
// a slot is never free while anyone waits, so [Group.Waiting] counts
// exactly the waiters without one (a test on a virtual clock relies on
// it).
type Group struct {
	name string
	cap  int

	mu      sync.Mutex
	inUse   int
	waiters []*slotWaiter // first come, first served
}

// slotWaiter is one Acquire waiting: granted is closed when Release
// handed it a slot.
type slotWaiter struct {
	granted chan struct{}
}

// NewGroup returns a group of n slots named name (the name logs and
// metrics show), or an error matching [ErrSettings].
func NewGroup(name string, n int) (*Group, error) {
	switch {
	case name == "":
		return nil, settingsError("concurrency group: no name")
	case n < 1:
		return nil, settingsError("concurrency group %q of %d: want at least 1 slot", name, n)
	}
	return &Group{name: name, cap: n}, nil
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// Cap returns how many handlers the group lets run at once.
func (g *Group) Cap() int { return g.cap }

// InUse returns how many slots are taken now.
func (g *Group) InUse() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inUse
}

// Waiting returns how many Acquire calls wait for a slot now.
func (g *Group) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiters)
}

// TryAcquire takes a slot if one is free and reports whether it did.
func (g *Group) TryAcquire() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inUse < g.cap {
		g.inUse++
		return true
	}
	return false
}

// Acquire takes a slot, waiting for one if none is free; a free slot is
// taken at once even if ctx or stop has ended. A wait ends with ctx's
// error or [ErrStopped], having taken nothing. A nil stop never closes.
func (g *Group) Acquire(ctx context.Context, stop <-chan struct{}) error {
	g.mu.Lock()
	if g.inUse < g.cap {
		g.inUse++
		g.mu.Unlock()
		return nil
	}
	w := &slotWaiter{granted: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()
	var err error
	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-stop:
		err = ErrStopped
	}
	g.mu.Lock()
	if i := slices.Index(g.waiters, w); i >= 0 {
		g.waiters = slices.Delete(g.waiters, i, i+1)
		g.mu.Unlock()
		return err
	}
	g.mu.Unlock()
	// Granted as the wait ended: the slot is ours, and goes on.
	g.Release()
	return err
}

// Release gives back a slot taken by Acquire or TryAcquire, to the first
// waiter if there is one. Releasing a slot never taken is a bug in the
// caller and panics, as unlocking an unlocked sync.Mutex does, rather than
// let the group admit one more than its cap for ever.
func (g *Group) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inUse == 0 {
		panic("acemq: flow: release of a group slot never taken (" + g.name + ")")
	}
	if len(g.waiters) > 0 {
		w := g.waiters[0]
		g.waiters = g.waiters[1:]
		close(w.granted) // the slot passes on: inUse stays
		return
	}
	g.inUse--
}
