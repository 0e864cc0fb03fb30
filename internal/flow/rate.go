package flow

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/acemq/acemq/transport"
)

// Rate is a token bucket on the engine's clock: Limit tokens a second,
// up to Burst at once. One Rate may be shared by several queues, for a
// downstream API with one quota. It starts no goroutine: [Rate.Take] and
// [Rate.Reserve] say when a token is there, so the engine can wait for it
// off the worker; [Rate.Wait] is the blocking convenience on top.
//
// It keeps the bucket as the time it will next be full (the generic cell
// rate algorithm), in float nanoseconds, so that a limit that does not
// divide a second (3 a second) loses nothing to rounding over a long run.
type Rate struct {
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
	limit float64
	burst int
	base  time.Time
	every float64 // nanoseconds a token takes to come
	slack float64 // (burst-1) * every: how far ahead of now the bucket may be spent

	mu  sync.Mutex
	tat float64 // nanoseconds after base when the bucket is spent to the last token
}

// Reservation is a token booked by [Rate.Reserve]: it is the holder's
// from At on.
type Reservation struct{ At time.Time }

// NewRate returns a full bucket of burst tokens, filling at limit tokens
// a second on clock, or an error matching [ErrSettings].
func NewRate(clock transport.Clock, limit float64, burst int) (*Rate, error) {
	switch {
	case clock == nil:
		return nil, settingsError("rate: no clock")
	case math.IsNaN(limit) || math.IsInf(limit, 0) || limit <= 0:
		return nil, settingsError("rate of %v a second: want a positive, finite number", limit)
	case float64(time.Second)/limit < 1:
		return nil, settingsError("rate of %v a second: more than one a nanosecond", limit)
	case burst < 1:
		return nil, settingsError("rate burst %d: want at least 1", burst)
	}
	every := float64(time.Second) / limit
	return &Rate{
		now: clock.Now, after: clock.After, limit: limit, burst: burst,
		base: clock.Now(), every: every, slack: float64(burst-1) * every,
	}, nil
}

// Limit returns the tokens a second.
func (r *Rate) Limit() float64 { return r.limit }

// Burst returns how many tokens the bucket holds when full.
func (r *Rate) Burst() int { return r.burst }

// Take takes a token if one is there now and reports true; otherwise it
// takes nothing and returns when the next one will be there, for the
// caller to ask again then (another sharer may take it first: the
// caller that must not lose its turn uses [Rate.Reserve]).
func (r *Rate) Take() (ok bool, next time.Time) {
	now := r.now()
	t := r.nanos(now)
	r.mu.Lock()
	defer r.mu.Unlock()
	tat := max(r.tat, t)
	if tat-t <= r.slack+0.5 {
		r.tat = tat + r.every
		return true, now
	}
	return false, r.time(tat - r.slack)
}

// Reserve books the next token and returns when it is the caller's: now
// if the bucket has one, else the first moment one is free after every
// earlier booking. A caller that gives up before then hands it back with
// [Rate.Cancel].
func (r *Rate) Reserve() Reservation { return r.reserve(r.now()) }

func (r *Rate) reserve(now time.Time) Reservation {
	t := r.nanos(now)
	r.mu.Lock()
	defer r.mu.Unlock()
	tat := max(r.tat, t)
	r.tat = tat + r.every
	if at := tat - r.slack; at > t {
		return Reservation{At: r.time(at)}
	}
	return Reservation{At: now}
}

// Cancel hands back a reservation not yet due, so that the next booking
// gets its place; one already due was the holder's to spend and is not
// handed back. Cancel each reservation at most once.
func (r *Rate) Cancel(res Reservation) {
	now := r.now()
	if !res.At.After(now) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tat -= r.every
}

// Wait returns once the caller has a token, or with ctx's error (handing
// its booking back) if ctx ends first. It waits on the rate's clock.
func (r *Rate) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := r.now()
	res := r.reserve(now)
	if !res.At.After(now) {
		return nil
	}
	select {
	case <-r.after(res.At.Sub(now)):
		return nil
	case <-ctx.Done():
		r.Cancel(res)
		return ctx.Err()
	}
}

func (r *Rate) nanos(t time.Time) float64 { return float64(t.Sub(r.base)) }

// time turns nanoseconds after base into a time, rounded up so that a
// caller waking at it finds its token there.
func (r *Rate) time(ns float64) time.Time { return r.base.Add(time.Duration(math.Ceil(ns))) }
