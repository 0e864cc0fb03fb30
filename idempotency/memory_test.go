package idempotency_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/acemq/acemq/idempotency"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	runStoreSuite(t, func(t *testing.T, clock *fakeClock) idempotency.Store {
		return idempotency.NewMemory(suiteRetention, idempotency.WithLease(suiteLease), idempotency.WithClock(clock.Now))
	})
}

func TestMemoryMaxEntries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newFakeClock()
	s := idempotency.NewMemory(time.Hour, idempotency.WithMaxEntries(3), idempotency.WithClock(clock.Now))
	handle := func(id string) {
		t.Helper()
		if ok, _ := s.Claim(ctx, id); !ok {
			t.Fatalf("Claim(%q) refused", id)
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
		if ok, _ := s.Claim(ctx, id); ok {
			t.Errorf("Claim(%q) won; it should still be remembered", id)
		}
	}
	for _, id := range []string{"a", "b"} {
		if ok, _ := s.Claim(ctx, id); !ok {
			t.Errorf("Claim(%q) refused; it should have been evicted", id)
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
	if ok, _ := s.Claim(ctx, "in-flight"); ok {
		t.Error("the in-flight claim was evicted while a confirmed id was left")
	}
	if n := s.Evictions(); n != 1 {
		t.Errorf("Evictions() = %d, want 1", n)
	}
}

func TestMemoryExpiredIDsAreNotEvictions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newFakeClock()
	s := idempotency.NewMemory(time.Minute, idempotency.WithMaxEntries(10), idempotency.WithClock(clock.Now))
	for i := range 10 {
		id := strconv.Itoa(i)
		_, _ = s.Claim(ctx, id)
		_ = s.Confirm(ctx, id)
	}
	clock.Advance(time.Minute)
	for i := range 10 {
		if ok, _ := s.Claim(ctx, fmt.Sprint("new-", i)); !ok {
			t.Fatalf("claim %d refused", i)
		}
	}
	if n := s.Evictions(); n != 0 {
		t.Errorf("Evictions() = %d after the old ids expired, want 0", n)
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

func BenchmarkMemoryClaimConfirm(b *testing.B) {
	ctx := context.Background()
	s := idempotency.NewMemory(time.Hour)
	ids := make([]string, 1<<18) // past the default size: eviction is in the figure
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := ids[i%len(ids)]
		i++
		if ok, _ := s.Claim(ctx, id); ok {
			_ = s.Confirm(ctx, id)
		}
	}
}

func BenchmarkMemoryClaimConfirmParallel(b *testing.B) {
	ctx := context.Background()
	s := idempotency.NewMemory(time.Hour)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 0, 32)
		n := 0
		for pb.Next() {
			buf = strconv.AppendInt(buf[:0], int64(n), 10)
			n++
			id := fmt.Sprintf("%p-%s", pb, buf)
			if ok, _ := s.Claim(ctx, id); ok {
				_ = s.Confirm(ctx, id)
			}
		}
	})
}
