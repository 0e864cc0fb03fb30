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
	lease
)

type step struct {
	op   op
	id   string
	d    time.Duration           // for advance, and the lease left for lease
	want idempotency.ClaimResult // for claim
}

// Steps read like the sequence they test.
func claimed(id string) step          { return step{op: claim, id: id, want: idempotency.Claimed} }
func done(id string) step             { return step{op: claim, id: id, want: idempotency.Done} }
func inProgress(id string) step       { return step{op: claim, id: id, want: idempotency.InProgress} }
func confirmed(id string) step        { return step{op: confirm, id: id} }
func released(id string) step         { return step{op: release, id: id} }
func after(d time.Duration) step      { return step{op: advance, d: d} }
func justBefore(d time.Duration) step { return after(d - time.Microsecond) }
func leaseLeft(id string, d time.Duration) step {
	return step{op: lease, id: id, d: d}
}

// run takes st on s, failing the test with what for a wrong claim or an
// error.
func (st step) run(t *testing.T, s idempotency.Store, clock *fakeClock, what string) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch st.op {
	case claim:
		var got idempotency.ClaimResult
		got, err = s.Claim(ctx, st.id)
		if err == nil && got != st.want {
			t.Fatalf("%s: Claim(%s) = %v, want %v", what, short(st.id), got, st.want)
		}
	case confirm:
		err = s.Confirm(ctx, st.id)
	case release:
		err = s.Release(ctx, st.id)
	case advance:
		clock.Advance(st.d)
	case lease:
		var left time.Duration
		left, err = s.(idempotency.LeaseReporter).LeaseLeft(ctx, st.id)
		if err == nil && left != st.d {
			t.Fatalf("%s: LeaseLeft(%s) = %v, want %v", what, short(st.id), left, st.d)
		}
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// runStoreSuite is the behaviour every Store shares, run against each one.
func runStoreSuite(t *testing.T, newStore newStoreFunc) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"a new id is claimed once, then in progress", []step{claimed("a"), inProgress("a")}},
		{"ids are independent", []step{claimed("a"), claimed("b"), inProgress("a"), inProgress("b")}},
		{"a confirmed id is done", []step{claimed("a"), confirmed("a"), done("a"), done("a")}},
		{"a released id is claimed again", []step{claimed("a"), released("a"), claimed("a"), inProgress("a")}},
		{"release after confirm does nothing", []step{claimed("a"), confirmed("a"), released("a"), done("a")}},
		{"release of an unknown id does nothing", []step{released("a"), claimed("a")}},
		{"confirm without a claim records the id", []step{confirmed("a"), done("a")}},
		{"an unsettled claim ends with its lease", []step{
			claimed("a"), justBefore(suiteLease), inProgress("a"), after(time.Microsecond), claimed("a"), inProgress("a"),
		}},
		{"a confirmed id is done past its lease", []step{
			claimed("a"), confirmed("a"), after(2 * suiteLease), done("a"),
		}},
		{"a confirmed id is kept for the retention", []step{
			claimed("a"), confirmed("a"), justBefore(suiteRetention), done("a"), after(time.Microsecond), claimed("a"), inProgress("a"),
		}},
		{"confirm after the lease ended still records the id", []step{
			claimed("a"), after(suiteLease), confirmed("a"), done("a"),
		}},
		{"a late confirm overrides the claim that took over", []step{
			claimed("a"), after(suiteLease), claimed("a"), confirmed("a"), done("a"),
		}},
		{"retention counts from the confirm", []step{
			claimed("a"), after(suiteLease - time.Second), confirmed("a"), justBefore(suiteRetention), done("a"),
		}},
		// A's lease ends while its handler still runs and B takes the id
		// over. A's Release must not free B's claim: a third claimer would
		// run the work while B still does.
		{"a release after the lease ended leaves the claim that took over", []step{
			claimed("a"), after(suiteLease), claimed("a"), released("a"), inProgress("a"), confirmed("a"), done("a"),
		}},
		{"the claim that took over still ends with its lease", []step{
			claimed("a"), after(suiteLease), claimed("a"), released("a"),
			justBefore(suiteLease), inProgress("a"), after(time.Microsecond), claimed("a"), inProgress("a"),
		}},
		{"the id is free once both claims are released", []step{
			claimed("a"), after(suiteLease), claimed("a"), released("a"), released("a"), claimed("a"), inProgress("a"),
		}},
		{"a late confirm after a takeover outlasts the other release", []step{
			claimed("a"), after(suiteLease), claimed("a"), confirmed("a"), released("a"), done("a"),
		}},
		// What middleware.Idempotent snoozes an in-progress message for.
		{"the lease left counts down to zero", []step{
			claimed("a"), leaseLeft("a", suiteLease), after(20 * time.Second), leaseLeft("a", suiteLease-20*time.Second),
			justBefore(suiteLease - 20*time.Second), leaseLeft("a", time.Microsecond), after(time.Microsecond), leaseLeft("a", 0),
		}},
		{"a settled or unknown id has no lease left", []step{
			leaseLeft("never", 0), claimed("a"), confirmed("a"), leaseLeft("a", 0), claimed("b"), released("b"), leaseLeft("b", 0),
		}},
		{"the claim that took over has a lease of its own", []step{
			claimed("a"), after(suiteLease + time.Second), leaseLeft("a", 0), claimed("a"), leaseLeft("a", suiteLease),
		}},
		{"a release after the lease ended, with no takeover, frees the id", []step{
			claimed("a"), after(suiteLease), released("a"), claimed("a"), inProgress("a"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			s := newStore(t, clock)
			for i, st := range tt.steps {
				st.run(t, s, clock, fmt.Sprint("step ", i))
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
			if got := claimAtOnce(t, s, id); got[idempotency.Claimed] != 1 || got[idempotency.InProgress] != racers-1 {
				t.Fatalf("round %d: %d concurrent claims found %v; want exactly one claimed, the rest in progress", round, racers, got)
			}
		}
	})

	// Claims racing a confirm: none is told done before the confirm began,
	// and every one that begins after it returned is.
	t.Run("done means confirmed", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, newFakeClock())
		ctx := context.Background()
		if r, err := s.Claim(ctx, "a"); r != idempotency.Claimed || err != nil {
			t.Fatalf("Claim = %v, %v", r, err)
		}
		var confirming, confirmed atomic.Bool
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				for {
					after := confirmed.Load()
					r, err := s.Claim(ctx, "a")
					switch {
					case err != nil:
						t.Error(err)
						return
					case r == idempotency.Done && !confirming.Load():
						t.Error("Claim answered done before Confirm was called")
						return
					case r != idempotency.Done && after:
						t.Errorf("Claim begun after Confirm returned answered %v, want done", r)
						return
					case r == idempotency.Claimed:
						t.Error("Claim won an id held by a claim within its lease")
						return
					case r == idempotency.Done:
						return
					}
				}
			})
		}
		time.Sleep(20 * time.Millisecond) // let the claimers find it in progress
		confirming.Store(true)
		if err := s.Confirm(ctx, "a"); err != nil {
			t.Error(err)
		}
		confirmed.Store(true)
		wg.Wait()
	})

	// An id claimed and released over and over, by racing claimers, is
	// never done: it changes hands between a refused claim and the read of
	// what refused it, and that must not read as a confirm.
	t.Run("an id that is never confirmed is never done", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, newFakeClock())
		ctx := context.Background()
		var results [4]atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 50 {
					r, err := s.Claim(ctx, "churn")
					if err != nil {
						t.Error(err)
						return
					}
					results[r].Add(1)
					if r == idempotency.Claimed {
						if err := s.Release(ctx, "churn"); err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		if n := results[idempotency.Done].Load(); n != 0 {
			t.Errorf("%d claims of an id never confirmed answered done", n)
		}
		t.Logf("claimed %d times, in progress %d times", results[idempotency.Claimed].Load(), results[idempotency.InProgress].Load())
	})

	t.Run("any id but the empty one works", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, newFakeClock())
		for _, tt := range oddIDs() {
			// Each id goes through the whole sequence, and none is taken
			// for another: the ids before it are done, and this one is
			// claimed first all the same.
			steps := []step{claimed(tt.id), inProgress(tt.id), released(tt.id), claimed(tt.id), confirmed(tt.id), done(tt.id)}
			for i, st := range steps {
				st.run(t, s, nil, fmt.Sprintf("%s, step %d", tt.name, i))
			}
		}
	})

	t.Run("an empty id is an error", func(t *testing.T) {
		t.Parallel()
		s := newStore(t, newFakeClock())
		ctx := context.Background()
		if r, err := s.Claim(ctx, ""); r != 0 || !errors.Is(err, idempotency.ErrEmptyID) {
			t.Errorf("Claim(\"\") = %v, %v; want the zero result, ErrEmptyID", r, err)
		}
		if err := s.Confirm(ctx, ""); !errors.Is(err, idempotency.ErrEmptyID) {
			t.Errorf("Confirm(\"\") = %v, want ErrEmptyID", err)
		}
		if err := s.Release(ctx, ""); !errors.Is(err, idempotency.ErrEmptyID) {
			t.Errorf("Release(\"\") = %v, want ErrEmptyID", err)
		}
		if _, err := s.(idempotency.LeaseReporter).LeaseLeft(ctx, ""); !errors.Is(err, idempotency.ErrEmptyID) {
			t.Errorf("LeaseLeft(\"\") = %v, want ErrEmptyID", err)
		}
	})
}

// racers is how many goroutines claim one id at once.
const racers = 100

// claimAtOnce has racers goroutines claim id together and counts what they
// were told.
func claimAtOnce(t *testing.T, s idempotency.Store, id string) map[idempotency.ClaimResult]int {
	t.Helper()
	var mu sync.Mutex
	got := map[idempotency.ClaimResult]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range racers {
		wg.Go(func() {
			<-start
			r, err := s.Claim(context.Background(), id)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got[r]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return got
}

// short is an id cut for a test's message.
func short(id string) string {
	if len(id) > 40 {
		return fmt.Sprintf("%.40q... (%d bytes)", id, len(id))
	}
	return fmt.Sprintf("%q", id)
}

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
