package idempotency_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/idempotency"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	runStoreSuite(t, func(t *testing.T, clock *fakeClock) idempotency.Store {
		return idempotency.NewMemory(suiteRetention, idempotency.WithLease(suiteLease), idempotency.WithClock(clock))
	})
}

func TestMemoryMaxEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newFakeClock()
	s := idempotency.NewMemory(time.Hour, idempotency.WithMaxEntries(3), idempotency.WithClock(clock))
	handle := func(id string) {
		t.Helper()
		if r, _ := s.Claim(ctx, id); r != idempotency.Claimed {
			t.Fatalf("Claim(%q) = %v, want claimed", id, r)
		}
		_ = s.Confirm(ctx, id)
		clock.Advance(time.Second)
	}
	for _, id := range []string{"a", "b", "c"} {
		handle(id)
	}
	if n := s.Evictions(); n != 0 {
		t.Fatalf("Evictions() = %d at the limit, want 0", n)
	}
	handle("d") // a, the oldest, goes
	handle("e") // then b
	if n := s.Evictions(); n != 2 {
		t.Fatalf("Evictions() = %d, want 2", n)
	}
	// Refused claims add nothing, so checking them evicts nothing.
	for _, id := range []string{"c", "d", "e"} {
		if r, _ := s.Claim(ctx, id); r != idempotency.Done {
			t.Errorf("Claim(%q) = %v; it should still be remembered as done", id, r)
		}
	}
	for _, id := range []string{"a", "b"} {
		if r, _ := s.Claim(ctx, id); r != idempotency.Claimed {
			t.Errorf("Claim(%q) = %v; it should have been evicted", id, r)
		}
	}
}

func TestMemoryEvictsConfirmedBeforeInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := idempotency.NewMemory(time.Hour, idempotency.WithMaxEntries(2))
	_, _ = s.Claim(ctx, "in-flight") // oldest, but unsettled
	_, _ = s.Claim(ctx, "done")
	_ = s.Confirm(ctx, "done")
	_, _ = s.Claim(ctx, "new") // over the limit: "done" goes, not "in-flight"
	if r, _ := s.Claim(ctx, "in-flight"); r != idempotency.InProgress {
		t.Errorf("Claim(in-flight) = %v, want in progress: the in-flight claim was evicted while a confirmed id was left", r)
	}
	if n := s.Evictions(); n != 1 {
		t.Errorf("Evictions() = %d, want 1", n)
	}
}

// A claim whose lease ended unsettled is kept only to guard against its
// own late Release: when the store is full it goes first, before any
// confirmed id, and is not counted as an eviction.
func TestMemoryDropsLapsedClaimsFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newFakeClock()
	s := idempotency.NewMemory(time.Hour, idempotency.WithMaxEntries(2), idempotency.WithLease(time.Minute),
		idempotency.WithClock(clock))
	_, _ = s.Claim(ctx, "stuck") // never settled
	_, _ = s.Claim(ctx, "done")
	_ = s.Confirm(ctx, "done")
	clock.Advance(time.Minute) // the lease of "stuck" ends
	if r, _ := s.Claim(ctx, "new"); r != idempotency.Claimed {
		t.Fatalf("Claim(new) = %v, want claimed", r)
	}
	if r, _ := s.Claim(ctx, "done"); r != idempotency.Done {
		t.Errorf("Claim(done) = %v, want done: a confirmed id went before a lapsed claim", r)
	}
	if r, _ := s.Claim(ctx, "new"); r != idempotency.InProgress {
		t.Errorf("Claim(new) again = %v, want in progress", r)
	}
	if n := s.Evictions(); n != 0 {
		t.Errorf("Evictions() = %d, want 0: the lapsed claim's id was free already", n)
	}
}

func TestMemoryExpiredIDsAreNotEvictions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newFakeClock()
	s := idempotency.NewMemory(time.Minute, idempotency.WithMaxEntries(10), idempotency.WithClock(clock))
	for i := range 10 {
		id := strconv.Itoa(i)
		_, _ = s.Claim(ctx, id)
		_ = s.Confirm(ctx, id)
	}
	clock.Advance(time.Minute)
	for i := range 10 {
		if r, _ := s.Claim(ctx, fmt.Sprint("new-", i)); r != idempotency.Claimed {
			t.Fatalf("claim %d = %v", i, r)
		}
	}
	if n := s.Evictions(); n != 0 {
		t.Errorf("Evictions() = %d after the old ids expired, want 0", n)
	}
}

// The longest durations mean forever, not an overflow into the past.
func TestMemoryForever(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newFakeClock()
	clock.Advance(time.Hour) // later than the store's zero
	s := idempotency.NewMemory(math.MaxInt64, idempotency.WithLease(math.MaxInt64), idempotency.WithClock(clock))
	clock.Advance(time.Hour)
	_, _ = s.Claim(ctx, "claimed")
	_, _ = s.Claim(ctx, "confirmed")
	_ = s.Confirm(ctx, "confirmed")
	clock.Advance(100 * 365 * 24 * time.Hour)
	for id, want := range map[string]idempotency.ClaimResult{"claimed": idempotency.InProgress, "confirmed": idempotency.Done} {
		if r, _ := s.Claim(ctx, id); r != want {
			t.Errorf("Claim(%q) = %v a century later, want %v", id, r, want)
		}
	}
}

func TestNewMemoryPanicsOnBadSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		retention time.Duration
		opts      []idempotency.MemoryOption
	}{
		{"zero retention", 0, nil},
		{"negative retention", -time.Second, nil},
		{"zero lease", time.Hour, []idempotency.MemoryOption{idempotency.WithLease(0)}},
		{"zero max entries", time.Hour, []idempotency.MemoryOption{idempotency.WithMaxEntries(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Error("NewMemory did not panic")
				}
			}()
			idempotency.NewMemory(tt.retention, tt.opts...)
		})
	}
}

// BenchmarkMemoryClaimConfirm is what the store adds to a message handled
// for the first time: a claim and a confirm of a new id, with the store
// full so that each new id evicts an old one. The small store stays in the
// CPU's cache; the default one, 100 000 ids, mostly does not.
func BenchmarkMemoryClaimConfirm(b *testing.B) {
	for _, size := range []int{1 << 10, idempotency.DefaultMaxEntries} {
		b.Run(fmt.Sprintf("entries=%d", size), func(b *testing.B) {
			ctx := context.Background()
			s := idempotency.NewMemory(time.Hour, idempotency.WithMaxEntries(size))
			ids := uuids(size * 5 / 2) // each id comes back after it was evicted
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := ids[i%len(ids)]
				i++
				if r, _ := s.Claim(ctx, id); r != idempotency.Claimed {
					b.Fatalf("Claim(%q) = %v", id, r)
				}
				_ = s.Confirm(ctx, id)
			}
			reportRate(b)
		})
	}
}

func BenchmarkMemoryClaimConfirmParallel(b *testing.B) {
	ctx := context.Background()
	s := idempotency.NewMemory(time.Hour)
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		// Each goroutine a prefix of its own, so every claim is of a new id.
		prefix := strconv.FormatInt(next.Add(1), 10) + "-"
		ids := uuids(1 << 16)
		for i := range ids {
			ids[i] = prefix + ids[i]
		}
		i := 0
		for pb.Next() {
			id := ids[i%len(ids)]
			i++
			if r, _ := s.Claim(ctx, id); r == idempotency.Claimed {
				_ = s.Confirm(ctx, id)
			}
		}
	})
	reportRate(b)
}

// uuids returns n distinct ids shaped like the ones acemq makes.
func uuids(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rand.Uint32(), i>>16&0xffff, i&0xfff, rand.IntN(0x1000), rand.Uint64()&(1<<48-1))
	}
	return ids
}

// reportRate adds claim+confirm pairs per second to a benchmark's figures.
func reportRate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "claims/s")
	}
}
