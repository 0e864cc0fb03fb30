package wire

import "sync/atomic"

// boxCache hands out a value converted to an interface, reusing the last
// one it made while the value repeats: a header map holds its values as
// interfaces, and converting a string or a large integer is an allocation
// on every message. A stream of publishes to one routing key, or within one
// millisecond, shares one. Sharing is safe: what an interface holds cannot
// be changed through it. With every set to n, only every nth miss makes a
// new entry, so that a value changing on every call (routing keys taken in
// turn) costs little more than converting; a clock's millisecond, which
// only moves on, keeps every one.
type boxCache[T comparable] struct {
	every  uint32
	last   atomic.Pointer[boxed[T]]
	misses atomic.Uint32
}

type boxed[T comparable] struct {
	v   T
	box any
}

func (c *boxCache[T]) get(v T) any {
	if b := c.last.Load(); b != nil && b.v == v {
		return b.box
	}
	box := any(v)
	if c.every <= 1 || c.misses.Add(1)%c.every == 1 {
		c.last.Store(&boxed[T]{v, box})
	}
	return box
}

var (
	keyBoxes      = boxCache[string]{every: 16} // routing keys
	exchangeBoxes = boxCache[string]{every: 16}
	createdBoxes  = boxCache[int64]{every: 1} // creation times, Unix ms
)
