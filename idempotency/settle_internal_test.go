package idempotency

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/transport/memory"
)

// settleCases are claims settled one way or another, takeovers included:
// once each is settled, a store keeps nothing of it but confirmed ids.
// Each string is a sequence of c(laim), C(onfirm), r(elease) and l (the
// lease ends) on one id.
var settleCases = []struct {
	name, ops string
	confirmed bool
}{
	{"claim, confirm", "cC", true},
	{"claim, release", "cr", false},
	{"the lease ends, then release", "clr", false},
	{"takeover, both released", "clcrr", false},
	{"takeover, the first confirms, the other releases", "clcCr", true},
	{"takeover, the other confirms, the first releases", "clcrC", true},
	{"two takeovers, all released", "clclcrrr", false},
	{"release without a claim", "r", false},
}

// manualClock is a clock for these tests, moved by hand: a virtual one,
// as WithClock is given in a service's tests.
type manualClock = memory.Clock

func playSettle(t *testing.T, s Store, clock *manualClock, id, ops string) {
	t.Helper()
	ctx := context.Background()
	for i, op := range ops {
		var err error
		switch op {
		case 'c':
			var r ClaimResult
			if r, err = s.Claim(ctx, id); err == nil && r != Claimed {
				t.Fatalf("op %d: Claim = %v, want claimed", i, r)
			}
		case 'C':
			err = s.Confirm(ctx, id)
		case 'r':
			err = s.Release(ctx, id)
		case 'l':
			clock.Advance(time.Minute)
		}
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
}

func TestMemoryKeepsNothingSettled(t *testing.T) {
	t.Parallel()
	for _, tt := range settleCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := memory.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			s := NewMemory(time.Hour, WithLease(time.Minute), WithClock(clock))
			playSettle(t, s, clock, "a", tt.ops)
			s.mu.Lock()
			defer s.mu.Unlock()
			want := 0
			if tt.confirmed {
				want = 1
			}
			if n := len(s.entries); n != want || s.pending.head != nil || s.lapsed.head != nil {
				t.Errorf("%d entries, pending %v, lapsed %v after %q; want %d and no claims", n,
					s.pending.head != nil, s.lapsed.head != nil, tt.ops, want)
			}
		})
	}
}

func TestPostgresKeepsNothingSettled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
	for _, tt := range settleCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := memory.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			table := fmt.Sprintf("idem_settle_%016x", rand.Uint64())
			s, err := NewPostgres(pool, WithTable(table), WithLease(time.Minute), WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, s.CreateTableSQL()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE "+table) })
			playSettle(t, s, clock, "a", tt.ops)
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.held) != 0 {
				t.Errorf("held %v after %q, want nothing", s.held, tt.ops)
			}
		})
	}
}
