package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Clock is what a wait needs of a clock. Its method set is that of
// transport.Clock, so the memory transport's virtual clock, or any other
// transport.Clock, is one; it is declared here rather than imported so that
// this package depends on nothing of acemq's and any package may use it.
type Clock interface {
	Now() time.Time
	// After is time.After on this clock.
	After(d time.Duration) <-chan time.Time
}

// Policy says how long to wait before each retry: Min, doubled per retry,
// up to Max.
//
// A Min of zero or less is taken as 100ms, so that neither the zero Policy
// nor a mistaken one retries in a hot loop. A Max below Min (the zero Max
// included) is taken as Min: every wait is Min. A caller whose cap must win
// over its minimum passes min(Min, Max) as Min.
type Policy struct {
	Min, Max time.Duration // the first wait, and the cap
	// Jitter spreads each wait over its upper half, d/2 to d, so that a
	// fleet of clients that failed together (a broker restart) does not
	// retry in step.
	Jitter bool
}

// fallbackMin is the first wait of a Policy whose Min is not positive.
const fallbackMin = 100 * time.Millisecond

// Delay is the wait before retry n (0-based, a negative n counts as 0):
// Min doubled n times, capped at Max, then jittered if asked. It never
// overflows, however large n or Max.
func (p Policy) Delay(n int) time.Duration {
	lo, hi := p.Min, p.Max
	if lo <= 0 {
		lo = fallbackMin
	}
	hi = max(hi, lo)
	n = max(n, 0)
	d := hi
	if n < 63 && lo <= hi>>n { // then lo<<n <= hi: no overflow, no cap
		d = lo << n
	}
	if p.Jitter {
		d -= rand.N(d/2 + 1)
	}
	return d
}

// Wait waits Delay(n) on c, a nil c being the wall clock. It returns nil
// once the wait is over, or ctx's error if ctx ends first.
func (p Policy) Wait(ctx context.Context, c Clock, n int) error {
	return Sleep(ctx, c, p.Delay(n), nil)
}

// ErrWoken is what [Sleep] returns when its wake channel cut the wait
// short, so that a caller can tell a wake from the time passing.
var ErrWoken = errors.New("acemq: backoff: woken before the wait was over")

// Sleep waits d on c, a nil c being the wall clock, unless ctx ends first
// (it returns ctx's error) or wake receives first (it returns [ErrWoken]).
// A nil wake never receives. It is the wait that is not a retry's (a poll
// interval that work arriving cuts short), and the one under [Policy.Wait].
func Sleep(ctx context.Context, c Clock, d time.Duration, wake <-chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var over <-chan time.Time
	if c == nil {
		t := time.NewTimer(d)
		defer t.Stop()
		over = t.C
	} else {
		over = c.After(d)
	}
	select {
	case <-over:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
		return ErrWoken
	}
}
