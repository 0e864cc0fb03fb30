package flow

import (
	"context"
	"errors"
)

// ErrStopped is what [Group.Acquire] returns when its stop channel closed
// before a slot was free.
var ErrStopped = errors.New("acemq: stopped while waiting for a slot")

// Group caps how many handlers run at once across the queues that share
// it (at most N for a named group: one database's connection budget, a
// partner's concurrent-request limit). A slot is taken before a handler
// starts and given back when it returns. Waiters are served in about the
// order they came (a Go channel's queue of senders).
type Group struct {
	name  string
	slots chan struct{}
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
	return &Group{name: name, slots: make(chan struct{}, n)}, nil
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// Cap returns how many handlers the group lets run at once.
func (g *Group) Cap() int { return cap(g.slots) }

// InUse returns how many slots are taken now.
func (g *Group) InUse() int { return len(g.slots) }

// TryAcquire takes a slot if one is free and reports whether it did.
func (g *Group) TryAcquire() bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// Acquire takes a slot, waiting for one if none is free; a free slot is
// taken at once even if ctx or stop has ended. A wait ends with ctx's
// error or [ErrStopped], having taken nothing. A nil stop never closes.
func (g *Group) Acquire(ctx context.Context, stop <-chan struct{}) error {
	select {
	case g.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return ErrStopped
	}
}

// Release gives back a slot taken by Acquire or TryAcquire. Releasing a
// slot never taken is a bug in the caller and panics, as unlocking an
// unlocked sync.Mutex does, rather than let the group admit one more than
// its cap for ever.
func (g *Group) Release() {
	select {
	case <-g.slots:
	default:
		panic("acemq: flow: release of a group slot never taken (" + g.name + ")")
	}
}
