package idempotency

import (
	"context"
	"fmt"
	"math"
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
// that come after them, except claims whose lease ended, which are kept
// until they are settled ([Memory.Release] says why). It is safe for
// concurrent use. Its calls never block and never look at their context;
// the only error they return is [ErrEmptyID]. Ids are filed under their
// [Key], so a long id costs no more than 71 bytes.
type Memory struct {
	retention int64 // nanoseconds
	lease     int64 // nanoseconds
	max       int
	start     time.Time        // the clock's zero: times are nanoseconds since
	now       func() time.Time // nil: the monotonic clock, read through start

	evictions atomic.Int64

	mu        sync.Mutex
	entries   map[string]*entry
	pending   list   // claimed ids, in lease-end order
	lapsed    list   // claimed ids whose lease ended unsettled, in lease-end order
	confirmed list   // confirmed ids, in confirmation order
	spare     *entry // dropped entries kept for reuse, linked by next
	spares    int
}

// maxSpares bounds the entries a Memory store keeps for reuse after a
// release or an expiry; an eviction hands its entry straight on.
const maxSpares = 256

var _ Store = (*Memory)(nil)

// NewMemory returns a Memory store that remembers a confirmed id for
// retention. A retention, lease or size that is not positive panics: it is a
// mistake at start-up, not at the first message.
func NewMemory(retention time.Duration, opts ...MemoryOption) *Memory {
	cfg := memoryConfig{shared: shared{lease: DefaultLease}, maxEntries: DefaultMaxEntries}
	for _, o := range opts {
		o.applyMemory(&cfg)
	}
	switch {
	case retention <= 0:
		panic(fmt.Sprintf("idempotency: NewMemory with a retention of %s; it must be positive", retention))
	case cfg.lease <= 0:
		panic(fmt.Sprintf("idempotency: NewMemory with a lease of %s; it must be positive", cfg.lease))
	case cfg.maxEntries <= 0:
		panic(fmt.Sprintf("idempotency: NewMemory with %d max entries; it must be positive", cfg.maxEntries))
	}
	s := &Memory{
		retention: int64(retention),
		lease:     int64(cfg.lease),
		max:       cfg.maxEntries,
		now:       cfg.now,
		entries:   make(map[string]*entry),
	}
	if s.now != nil {
		s.start = s.now()
	} else {
		s.start = time.Now()
	}
	return s
}

// clock is the time in nanoseconds since the store was made. The default
// reads only the monotonic clock, half the cost of time.Now.
func (s *Memory) clock() int64 {
	if s.now == nil {
		return int64(time.Since(s.start))
	}
	return int64(s.now().Sub(s.start))
}

// later is now+d, saturated: a retention of math.MaxInt64 means forever,
// not an overflow into the past.
func later(now, d int64) int64 {
	if t := now + d; t >= now {
		return t
	}
	return math.MaxInt64
}

// Claim implements [Store]. A claim in progress in this store can only be
// this process's own: a handler still running, or one stuck past its
// lease.
func (s *Memory) Claim(_ context.Context, id string) (ClaimResult, error) {
	key, err := Key(id)
	if err != nil {
		return 0, err
	}
	now := s.clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	e := s.entries[key]
	switch {
	case e == nil:
		e = s.add(key)
	case e.state == confirmed && now < e.expires:
		return Done, nil
	case e.state == pending && now < e.expires:
		return InProgress, nil
	default: // lapsed, or expired but not yet swept: take it over
		s.listOf(e).remove(e)
	}
	e.state, e.expires = pending, later(now, s.lease)
	e.claims++
	s.pending.push(e)
	return Claimed, nil
}

// LeaseLeft implements [LeaseReporter]: how long the unsettled claim on
// id holds it still, or zero when none does.
func (s *Memory) LeaseLeft(_ context.Context, id string) (time.Duration, error) {
	key, err := Key(id)
	if err != nil {
		return 0, err
	}
	now := s.clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.entries[key]; e != nil && e.state == pending && now < e.expires {
		return time.Duration(e.expires - now), nil
	}
	return 0, nil
}

// Confirm implements [Store]. It settles every claim of id: the work is
// done, so none of them has anything left to release.
func (s *Memory) Confirm(_ context.Context, id string) error {
	key, err := Key(id)
	if err != nil {
		return err
	}
	now := s.clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	e := s.entries[key]
	if e != nil {
		s.listOf(e).remove(e)
	} else {
		e = s.add(key)
	}
	e.state, e.claims, e.expires = confirmed, 0, later(now, s.retention)
	s.confirmed.push(e)
	return nil
}

// Release implements [Store]. The calls carry only the id, so the store
// cannot tell which of its claimers a Release comes from. When a claim's
// lease ends and another takes the id over, both are unsettled, and a
// Release that freed the id could be the first one's, late, letting a
// third claimer run the work while the second still does. So while more
// than one claim of an id is unsettled, a Release only counts one down:
// the id stays held until the newer lease ends, the last claim is
// released or the id is confirmed. For that count, a claim whose lease
// ended is kept until it is settled. One never settled (a caller that
// breaks the Store contract, or a handler that never returns) is kept
// until the store is full, then goes first, uncounted by [Memory.Evictions].
func (s *Memory) Release(_ context.Context, id string) error {
	key, err := Key(id)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e := s.entries[key]; {
	case e == nil || e.state == confirmed:
		// nothing to release
	case e.claims > 1:
		e.claims--
	default:
		s.recycle(s.drop(e))
	}
	return nil
}

// Evictions returns how many ids were dropped before their time because the
// store was full. Each is a claim forgotten early: a redelivery of that id
// will be handled again. A number that grows means the store is too small
// for its retention. Claims whose lease ended unsettled are dropped first,
// and not counted: their ids were free already.
func (s *Memory) Evictions() int64 { return s.evictions.Load() }

// expire moves the claims whose lease ended to the lapsed list, and drops
// the confirmed ids whose retention passed, from the front of their lists.
// Leases and retention are fixed, so each list is in expiry order.
func (s *Memory) expire(now int64) {
	for s.pending.head != nil && now >= s.pending.head.expires {
		e := s.pending.head
		s.pending.remove(e)
		e.state = lapsed
		s.lapsed.push(e)
	}
	for s.confirmed.head != nil && now >= s.confirmed.head.expires {
		s.recycle(s.drop(s.confirmed.head))
	}
}

// add files a new entry under key, in no list yet. When the store is full
// it first drops the oldest lapsed claim, which only guards against its own
// late Release, then evicts the oldest confirmed id, and reuses its entry.
// A claim in flight is evicted only when no confirmed id is left, since
// dropping it lets a concurrent duplicate run at once.
func (s *Memory) add(key string) *entry {
	var e *entry
	switch {
	case len(s.entries) >= s.max && s.lapsed.head != nil:
		e = s.drop(s.lapsed.head)
	case len(s.entries) >= s.max:
		victim := s.confirmed.head
		if victim == nil {
			victim = s.pending.head
		}
		e = s.drop(victim)
		s.evictions.Add(1)
	case s.spare != nil:
		e, s.spare = s.spare, s.spare.next
		e.next = nil
		s.spares--
	default:
		e = new(entry)
	}
	e.id = key
	s.entries[key] = e
	return e
}

// drop forgets e and returns it, cleared, for reuse.
func (s *Memory) drop(e *entry) *entry {
	s.listOf(e).remove(e)
	delete(s.entries, e.id)
	*e = entry{}
	return e
}

// recycle keeps a dropped entry for the next add, up to maxSpares.
func (s *Memory) recycle(e *entry) {
	if s.spares < maxSpares {
		e.next, s.spare = s.spare, e
		s.spares++
	}
}

func (s *Memory) listOf(e *entry) *list {
	switch e.state {
	case lapsed:
		return &s.lapsed
	case confirmed:
		return &s.confirmed
	}
	return &s.pending
}

// entry is one id, linked into the list of its state.
type entry struct {
	id         string
	expires    int64 // nanoseconds on the store's clock: lease or retention end
	claims     int32 // claims neither confirmed nor released; 0 once confirmed
	state      state
	prev, next *entry
}

// state is where an entry is: which list, and what its expires means.
type state uint8

const (
	pending   state = iota // claimed, within its lease
	lapsed                 // claimed, its lease ended, not yet settled
	confirmed              // confirmed, within the retention
)

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
