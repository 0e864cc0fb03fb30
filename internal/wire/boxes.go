package wire

import "sync/atomic"

// boxCache hands out a value converted to an interface, reusing the last
// one it made while the value repeats: a header map holds its values as
// interfaces, and converting a string or a large integer is an allocation
// on every message. A stream of publishes to one routing key, or within one
// millisecond, shares one. Sharing is safe: what an interface holds cannot
// be changed through it. A value that changes on every call makes a new
// entry only on every 16th miss, so it costs little more than converting.
type boxCache[T comparable] struct {
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
	if c.misses.Add(1)%16 == 1 {
		c.last.Store(&boxed[T]{v, box})
	}
	return box
}

var (
	keyBoxes      boxCache[string] // routing keys
	exchangeBoxes boxCache[string]
	createdBoxes  boxCache[int64] // creation times, Unix ms
)
