package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/acemq/acemq/internal/flow"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Throttle is one named throttle's settings (acemq.Throttle): a rate of
// handler starts and a cap on handlers running at once, shared by the
// queues that name it.
type Throttle struct {
	PerSecond   float64
	Burst       int
	Concurrency int
}

// throttle is a Throttle running on the engine's clock.
type throttle struct {
	name  string
	rate  *flow.Rate  // nil: no rate
	group *flow.Group // nil: no cap
}

// throttles makes the run's throttles, each once, by name.
func (e *Engine) throttles() (map[string]*throttle, error) {
	out := make(map[string]*throttle, len(e.cfg.Throttles))
	for name, t := range e.cfg.Throttles {
		th := &throttle{name: name}
		if t.PerSecond > 0 {
			r, err := flow.NewRate(e.clock, t.PerSecond, max(t.Burst, 1))
			if err != nil {
				return nil, fmt.Errorf("acemq: Server.Throttles[%q]: %w", name, err)
			}
			th.rate = r
		}
		if t.Concurrency > 0 {
			g, err := flow.NewGroup(name, t.Concurrency)
			if err != nil {
				return nil, fmt.Errorf("acemq: Server.Throttles[%q]: %w", name, err)
			}
			th.group = g
		}
		out[name] = th
	}
	return out, nil
}

// underThrottles gives each queue the throttles it names, in name order:
// groups are always taken in one order, so that two queues sharing two
// groups cannot each hold one and wait for the other.
func underThrottles(queues []*queueRun, all map[string]*throttle) {
	for _, q := range queues {
		names := slices.Sorted(slices.Values(q.throttleNames))
		for _, n := range names {
			q.throttles = append(q.throttles, all[n])
		}
	}
}

// admit waits, with a delivery in hand, until the queue's throttles let
// its handler start: a slot in each group, then a token of each rate, on
// the engine's clock. It reports false when a stop came first, with
// nothing held. It runs after the delivery is taken, not before: a worker
// holding a slot while it waited for a delivery would starve the other
// queues of the group, and one holding a token would let a burst of one
// token a worker through when messages arrive after a quiet spell. So a
// held-back message waits in its worker, within the queue's concurrency
// and prefetch, and nowhere else.
func (c *consumer) admit() bool {
	for i, t := range c.q.throttles {
		if t.group == nil {
			continue
		}
		if t.group.TryAcquire() {
			continue
		}
		began := c.e.clock.Now()
		if t.group.Acquire(c.e.handlerCtx, c.e.stop.requested) != nil {
			c.releaseFirst(i)
			return false
		}
		c.waited(t, "concurrency", c.e.clock.Now().Sub(began))
	}
	for _, t := range c.q.throttles {
		if t.rate == nil {
			continue
		}
		r := t.rate.Reserve()
		if wait := r.At.Sub(c.e.clock.Now()); wait > 0 {
			select {
			case <-c.e.clock.After(wait):
			case <-c.e.stop.requested:
				t.rate.Cancel(r)
				c.release()
				return false
			}
			c.waited(t, "rate", wait)
		}
	}
	return true
}

// waited records a wait a throttle made a handler's start wait, by
// throttle and limit (rate, concurrency): only a wait, so that a throttle
// that holds nothing back costs no metric.
func (c *consumer) waited(t *throttle, limit string, d time.Duration) {
	c.e.inst.throttled.Record(context.Background(), d.Seconds(), metric.WithAttributes(
		attribute.String("queue", c.q.name), attribute.String("throttle", t.name), attribute.String("limit", limit)))
}

// release gives back the group slots admit took.
func (c *consumer) release() {
	c.releaseFirst(len(c.q.throttles))
	c.moves.Add(1)
}

// releaseFirst releases the groups of the first n throttles.
func (c *consumer) releaseFirst(n int) {
	for _, t := range c.q.throttles[:n] {
		if t.group != nil {
			t.group.Release()
		}
	}
}
