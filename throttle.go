package acemq

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/acemq/acemq/internal/engine"
)

// Throttle caps the handlers of the queues that name it
// (QueueConfig.Throttles): how many start a second, and how many run at
// once, across all of those queues together. A downstream API with one
// quota is one Throttle named by every queue that calls it. A worker
// waits for the throttle before it takes its next delivery, on the
// server's clock: a message held back waits in the prefetch or the broker,
// never in a handler, and a stop ends the wait at once.
type Throttle struct {
	// PerSecond is how many handlers start a second; zero is no rate.
	PerSecond float64
	// Burst is how many may start at once above the rate after a quiet
	// spell; zero is one.
	Burst int
	// Concurrency is how many handlers run at once across the queues;
	// zero is no cap (each queue's own Concurrency still holds).
	Concurrency int
}

func (t Throttle) check() error {
	switch {
	case t.PerSecond < 0 || math.IsNaN(t.PerSecond) || math.IsInf(t.PerSecond, 0):
		return fmt.Errorf("PerSecond %v: want zero (no rate) or a positive rate", t.PerSecond)
	case t.Burst < 0:
		return fmt.Errorf("Burst %d: want zero (one) or more", t.Burst)
	case t.Concurrency < 0:
		return fmt.Errorf("Concurrency %d: want zero (no cap) or more", t.Concurrency)
	case t.PerSecond == 0 && t.Concurrency == 0:
		return fmt.Errorf("neither PerSecond nor Concurrency is set: it would throttle nothing")
	}
	return nil
}

// throttleNames checks the throttles a queue names: each named once, and
// each one of Server.Throttles.
func (s *Server) throttleNames(queue string, names []string) error {
	for i, n := range names {
		if _, ok := s.Throttles[n]; !ok {
			known := make([]string, 0, len(s.Throttles))
			for k := range s.Throttles {
				known = append(known, k)
			}
			slices.Sort(known)
			return fmt.Errorf("acemq: Server.Queues[%q].Throttles names %q, which Server.Throttles does not have (it has %s)", queue, n, orNothing(known))
		}
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("acemq: Server.Queues[%q].Throttles names %q twice", queue, n)
		}
	}
	return nil
}

func orNothing(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return `"` + strings.Join(names, `", "`) + `"`
}

// engineThrottles is Server.Throttles as the engine takes them.
func (s *Server) engineThrottles() map[string]engine.Throttle {
	if len(s.Throttles) == 0 {
		return nil
	}
	out := make(map[string]engine.Throttle, len(s.Throttles))
	for name, t := range s.Throttles {
		out[name] = engine.Throttle{PerSecond: t.PerSecond, Burst: t.Burst, Concurrency: t.Concurrency}
	}
	return out
}
