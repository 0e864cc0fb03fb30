package flow

import "time"

// OutageMemory is how many of its last outages a breaker remembers for
// [Breaker.Held]. A message older than the oldest remembered outage is
// judged on its age with the older outages counted in: at worst what the
// engine does without a breaker.
const OutageMemory = 16

// outage is one stretch from a trip to the close that ended it; end is
// zero while it lasts.
type outage struct{ start, end time.Time }

// outages is a ring of the last OutageMemory outages.
type outages struct {
	ring [OutageMemory]outage
	next int // where the next outage goes
	n    int
}

func (o *outages) begin(now time.Time) {
	o.ring[o.next] = outage{start: now}
	o.next = (o.next + 1) % OutageMemory
	o.n = min(o.n+1, OutageMemory)
}

func (o *outages) end(now time.Time) {
	if o.n == 0 {
		return
	}
	last := &o.ring[(o.next+OutageMemory-1)%OutageMemory]
	if last.end.IsZero() {
		last.end = now
	}
}

// since sums the time held between t and now.
func (o *outages) since(t, now time.Time) time.Duration {
	var held time.Duration
	for i := range o.n {
		out := o.ring[i]
		end := out.end
		if end.IsZero() || end.After(now) {
			end = now
		}
		start := out.start
		if start.Before(t) {
			start = t
		}
		if end.After(start) {
			held += end.Sub(start)
		}
	}
	return held
}
