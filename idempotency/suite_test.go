package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/idempotency"
)

// The suite's settings: every store under test is built with these and with
// the fake clock it is given.
const (
	suiteLease     = time.Minute
	suiteRetention = time.Hour
)

// newStoreFunc builds a fresh, empty store on clock for one subtest.
type newStoreFunc func(t *testing.T, clock *fakeClock) idempotency.Store

type op int

const (
	claim op = iota
	confirm
	release
	advance
)

type step struct {
	op   op
	id   string
	d    time.Duration // for advance
	want bool          // for claim
}

// Steps read like the sequence they test.
func claimed(id string) step          { return step{op: claim, id: id, want: true} }
func refused(id string) step          { return step{op: claim, id: id, want: false} }
func confirmed(id string) step        { return step{op: confirm, id: id} }
func released(id string) step         { return step{op: release, id: id} }
func after(d time.Duration) step      { return step{op: advance, d: d} }
func justBefore(d time.Duration) step { return after(d - time.Microsecond) }

// runStoreSuite is the behaviour every Store shares, run against each one.
func runStoreSuite(t *testing.T, newStore newStoreFunc) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"a new id is claimed once", []step{claimed("a"), refused("a")}},
		{"ids are independent", []step{claimed("a"), claimed("b"), refused("a"), refused("b")}},
		{"a confirmed id is refused", []step{claimed("a"), confirmed("a"), refused("a")}},
		{"a released id is claimed again", []step{claimed("a"), released("a"), claimed("a"), refused("a")}},
		{"release after confirm does nothing", []step{claimed("a"), confirmed("a"), released("a"), refused("a")}},
		{"release of an unknown id does nothing", []step{released("a"), claimed("a")}},
		{"confirm without a claim records the id", []step{confirmed("a"), refused("a")}},
		{"an unsettled claim ends with its lease", []step{
			claimed("a"), justBefore(suiteLease), refused("a"), after(time.Microsecond), claimed("a"), refused("a"),
		}},
		{"a confirmed id is kept for the retention", []step{
			claimed("a"), confirmed("a"), justBefore(suiteRetention), refused("a"), after(time.Microsecond), claimed("a"), refused("a"),
		}},
		{"confirm after the lease ended still records the id", []step{
			claimed("a"), after(suiteLease), confirmed("a"), refused("a"),
		}},
		{"retention counts from the confirm", []step{
			claimed("a"), after(suiteLease - time.Second), confirmed("a"), justBefore(suiteRetention), refused("a"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			s := newStore(t, clock)
			ctx := context.Background()
			for i, st := range tt.steps {
				var err error
				switch st.op {
				case claim:
					var got bool
					got, err = s.Claim(ctx, st.id)
					if err == nil && got != st.want {
						t.Fatalf("step %d: Claim(%q) = %v, want %v", i, st.id, got, st.want)
					}
				case confirm:
					err = s.Confirm(ctx, st.id)
				case release:
					err = s.Release(ctx, st.id)
				case advance:
					clock.Advance(st.d)
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
		})
	}

	t.Run("exactly one of many concurrent claims wins", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, newFakeClock())
		for round := range 5 {
			id := fmt.Sprintf("race-%d", round)
			if round == 4 {
				id = strings.Repeat("\x00race", 1000) // hashed, not stored as it is
			}
			var wins atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range racers {
				wg.Go(func() {
					<-start
					ok, err := s.Claim(context.Background(), id)
					if err != nil {
						t.Error(err)
					}
					if ok {
						wins.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			if n := wins.Load(); n != 1 {
				t.Fatalf("round %d: %d of %d concurrent claims won, want exactly 1", round, n, racers)
			}
		}
	})

	t.Run("any id but the empty one works", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, newFakeClock())
		ctx := context.Background()
		for _, tt := range oddIDs() {
			// Each id goes through the whole sequence, and none is taken
			// for another: the ids before it are still refused, not this one.
			steps := []step{claimed(tt.id), refused(tt.id), released(tt.id), claimed(tt.id), confirmed(tt.id), refused(tt.id)}
			for i, st := range steps {
				var err error
				switch st.op {
				case claim:
					var got bool
					got, err = s.Claim(ctx, st.id)
					if err == nil && got != st.want {
						t.Fatalf("%s, step %d: Claim = %v, want %v", tt.name, i, got, st.want)
					}
				case confirm:
					err = s.Confirm(ctx, st.id)
				case release:
					err = s.Release(ctx, st.id)
				}
				if err != nil {
					t.Fatalf("%s, step %d: %v", tt.name, i, err)
				}
			}
		}
	})

	t.Run("an empty id is an error", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, newFakeClock())
		ctx := context.Background()
		if ok, err := s.Claim(ctx, ""); ok || !errors.Is(err, idempotency.ErrEmptyID) {
			t.Errorf("Claim(\"\") = %v, %v; want false, ErrEmptyID", ok, err)
		}
		if err := s.Confirm(ctx, ""); !errors.Is(err, idempotency.ErrEmptyID) {
			t.Errorf("Confirm(\"\") = %v, want ErrEmptyID", err)
		}
		if err := s.Release(ctx, ""); !errors.Is(err, idempotency.ErrEmptyID) {
			t.Errorf("Release(\"\") = %v, want ErrEmptyID", err)
		}
	})
}

// racers is how many goroutines claim one id at once.
const racers = 100

type oddID struct{ name, id string }

// oddIDs are ids a store must take like any other: long, binary, quoted,
// SQL-looking, and ones that look like another id's key.
func oddIDs() []oddID {
	mib := strings.Repeat("0123456789abcdef", 1<<16)
	hashOfX, _ := idempotency.Key("x\x00")
	return []oddID{
		{"one byte", "a"},
		{"255 bytes, the longest stored as is", strings.Repeat("l", 255)},
		{"256 bytes", strings.Repeat("l", 256)},
		{"1 MiB", mib},
		{"1 MiB but the last byte", mib[:len(mib)-1] + "!"},
		{"NUL", "a\x00b"},
		{"NUL, another", "a\x00c"},
		{"only NUL", "\x00"},
		{"invalid UTF-8", "\xff\xfe\xfd"},
		{"a cut UTF-8 sequence", "caf\xc3"},
		{"non-ASCII", "commande-été-№5-🚚"},
		{"newlines and tabs", "line1\nline2\r\n\tend"},
		{"quotes", `'single' "double" ` + "`back`"},
		{"backslashes", `\\x00 \' \"`},
		{"SQL", `x'); DROP TABLE acemq_idempotency; --`},
		{"SQL placeholders", "$1 $2 ? %s %v"},
		{"spaces only", "   "},
		{"the key of another id", hashOfX},
		{"that other id", "x\x00"},
		{"a key's prefix", "sha256:"},
	}
}
