package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// The latency scenario's recorder: each message's receive − due time by
// index, a phase at a time, and the nearest-rank percentiles of them.

// phaseRec records one phase's arrivals: each message's latency, by index.
type phaseRec struct {
	id   int
	t0   time.Time
	rate float64        // 0: closed loop, latency not recorded
	lat  []atomic.Int64 // receive − due + 1 ns; 0 for not yet handled
	got  atomic.Int64   // distinct messages handled
	last atomic.Int64   // the latest receive, ns after t0
	dups atomic.Int64
	bad  atomic.Int64 // bodies of another phase, or unreadable
}

func newPhase(id int, n int, rate float64) *phaseRec {
	return &phaseRec{id: id, rate: rate, lat: make([]atomic.Int64, n)}
}

func (p *phaseRec) arrive(phase, index int, at time.Time) {
	if phase != p.id || index < 0 || index >= len(p.lat) {
		p.bad.Add(1)
		return
	}
	d := at.Sub(p.t0)
	if p.rate > 0 {
		d -= dueOffset(index, p.rate)
	}
	if !p.lat[index].CompareAndSwap(0, int64(d)+1) {
		p.dups.Add(1)
		return
	}
	for {
		l := p.last.Load()
		if int64(at.Sub(p.t0)) <= l || p.last.CompareAndSwap(l, int64(at.Sub(p.t0))) {
			break
		}
	}
	p.got.Add(1)
}

// wait returns once want messages were handled, or fails when the count
// does not move for stall.
func (p *phaseRec) wait(ctx context.Context, want int) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	last, moved := p.got.Load(), time.Now()
	for {
		now := p.got.Load()
		if int(now) >= want {
			return nil
		}
		if now != last {
			last, moved = now, time.Now()
		} else if time.Since(moved) > stall {
			return fmt.Errorf("phase %d stalled at %d of %d messages", p.id, now, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (p *phaseRec) latencies() []time.Duration {
	out := make([]time.Duration, 0, len(p.lat))
	for i := range p.lat {
		if v := p.lat[i].Load(); v > 0 {
			out = append(out, time.Duration(v-1))
		}
	}
	return out
}

// percentiles are nearest-rank: the smallest value with at least p of
// them at or below it.
func percentiles(ds []time.Duration, ps ...float64) []time.Duration {
	out := make([]time.Duration, len(ps))
	if len(ds) == 0 {
		return out
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	for k, p := range ps {
		i := int(math.Ceil(float64(len(s))*p-1e-9)) - 1
		out[k] = s[min(max(i, 0), len(s)-1)]
	}
	return out
}
