package idempotency

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Memory is a [Store] held in this process's memory, bounded by age
// (retention) and by size ([WithMaxEntries]).
//
// Know what it cannot do before relying on it. It is per process: it
// deduplicates the redeliveries one running consumer sees, which is most of
// them, and it cannot deduplicate across instances of a service, since each
// has its own. It is lost on restart, so a message redelivered because the
// process died is handled again. And it is bounded: past its size the
// oldest confirmed ids are evicted, each one a claim forgotten early and a
// duplicate waiting to happen; [Memory.Evictions] counts them and is the
// number to watch. When handled-once has to hold across instances and
// restarts, use [Postgres], or better make the work itself idempotent.
//
// Memory starts no goroutine: expired ids are dropped lazily, by the calls
// that come after them. It is safe for concurrent use.
type Memory struct {
	retention time.Duration
	lease     time.Duration
	max       int
	now       func() time.Time

	evictions atomic.Int64

	mu        sync.Mutex
	entries   map[string]*entry
	pending   list // claimed ids, in lease-end order
	confirmed list // confirmed ids, in confirmation order
}

var _ Store = (*Memory)(nil)

// NewMemory returns a Memory store that remembers a confirmed id for
// retention. A retention, lease or size that is not positive panics: it is a
// mistake at start-up, not at the first message.
func NewMemory(retention time.Duration, opts ...MemoryOption) *Memory {
	cfg := memoryConfig{shared: shared{lease: DefaultLease, now: time.Now}, maxEntries: DefaultMaxEntries}
	for _, o := range opts {
		o.applyMemory(&cfg)
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	switch {
	case retention <= 0:
		panic(fmt.Sprintf("idempotency: NewMemory with a retention of %s; it must be positive", retention))
	case cfg.lease <= 0:
		panic(fmt.Sprintf("idempotency: NewMemory with a lease of %s; it must be positive", cfg.lease))
	case cfg.maxEntries <= 0:
		panic(fmt.Sprintf("idempotency: NewMemory with %d max entries; it must be positive", cfg.maxEntries))
	}
	return &Memory{
		retention: retention,
		lease:     cfg.lease,
		max:       cfg.maxEntries,
		now:       cfg.now,
		entries:   make(map[string]*entry),
	}
}

// Claim implements [Store]. It never fails.
func (s *Memory) Claim(_ context.Context, id string) (bool, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	e := s.entries[id]
	if e != nil {
		if now.Before(e.expires) {
			return false, nil
		}
		s.listOf(e).remove(e) // expired but not yet swept: reuse it
	} else {
		e = &entry{id: id}
		s.entries[id] = e
	}
	e.confirmed, e.expires = false, now.Add(s.lease)
	s.pending.push(e)
	s.evict()
	return true, nil
}

// Confirm implements [Store]. It never fails.
func (s *Memory) Confirm(_ context.Context, id string) error {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	e := s.entries[id]
	if e != nil {
		s.listOf(e).remove(e)
	} else {
		e = &entry{id: id}
		s.entries[id] = e
	}
	e.confirmed, e.expires = true, now.Add(s.retention)
	s.confirmed.push(e)
	s.evict()
	return nil
}

// Release implements [Store]. It never fails.
func (s *Memory) Release(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[id]; e != nil && !e.confirmed {
		s.drop(e)
	}
	return nil
}

// Evictions returns how many ids were dropped before their time because the
// store was full. Each is a claim forgotten early: a redelivery of that id
// will be handled again. A number that grows means the store is too small
// for its retention.
func (s *Memory) Evictions() int64 { return s.evictions.Load() }

// expire drops the ids whose time is up from the front of both lists.
// Leases and retention are fixed, so each list is in expiry order.
func (s *Memory) expire(now time.Time) {
	for _, l := range []*list{&s.pending, &s.confirmed} {
		for l.head != nil && !now.Before(l.head.expires) {
			s.drop(l.head)
		}
	}
}

// evict drops the oldest confirmed ids while the store is over its size. A
// claim in flight is evicted only when no confirmed id is left, since
// dropping it lets a concurrent duplicate run at once.
func (s *Memory) evict() {
	for len(s.entries) > s.max {
		victim := s.confirmed.head
		if victim == nil {
			victim = s.pending.head
		}
		s.drop(victim)
		s.evictions.Add(1)
	}
}

func (s *Memory) drop(e *entry) {
	s.listOf(e).remove(e)
	delete(s.entries, e.id)
}

func (s *Memory) listOf(e *entry) *list {
	if e.confirmed {
		return &s.confirmed
	}
	return &s.pending
}

// entry is one id, linked into the list of its state.
type entry struct {
	id         string
	expires    time.Time
	confirmed  bool
	prev, next *entry
}

// list is an intrusive doubly linked list of entries, oldest at head.
type list struct{ head, tail *entry }

func (l *list) push(e *entry) {
	e.prev, e.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
}

func (l *list) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
}
