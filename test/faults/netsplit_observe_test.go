package faults_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// progress records when each handler call began, to find how long work
// stood still.
type progress struct {
	mu    sync.Mutex
	calls []time.Time
}

func (p *progress) record(h acemq.Handler) acemq.Handler {
	return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		p.mu.Lock()
		p.calls = append(p.calls, time.Now())
		p.mu.Unlock()
		return h.ServeMessage(ctx, m)
	})
}

// longestGap is the longest time between two handler calls within from
// and to, and when it began.
func (p *progress) longestGap(from, to time.Time) (time.Duration, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gap time.Duration
	var began, last time.Time
	for _, c := range p.calls {
		if c.Before(from) || c.After(to) {
			continue
		}
		if !last.IsZero() && c.Sub(last) > gap {
			gap, began = c.Sub(last), last
		}
		last = c
	}
	return gap, began
}

// perSecond is the handler calls in each second from from, for n seconds.
func (p *progress) perSecond(from time.Time, n int) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, n)
	for _, c := range p.calls {
		if k := int(c.Sub(from) / time.Second); c.After(from) && k < n {
			out[k]++
		}
	}
	return out
}

// perPhase counts the handler calls before the cut, from the cut to the
// victim's pause, from then to the heal, and after.
func (p *progress) perPhase(cut, paused, heal time.Time) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n [4]int
	for _, c := range p.calls {
		switch {
		case c.Before(cut):
			n[0]++
		case c.Before(paused):
			n[1]++
		case c.Before(heal):
			n[2]++
		default:
			n[3]++
		}
	}
	return fmt.Sprintf("%d calls before the cut, %d from the cut to the pause (%s), %d from the pause to the heal, %d after",
		n[0], n[1], paused.Sub(cut).Round(time.Millisecond), n[2], n[3])
}

// readiness polls servers' CheckReady every 250 ms and keeps, for each,
// the spans in which it said not ready.
type readiness struct {
	stopOnce sync.Once
	done     chan struct{}
	finished chan struct{}
	mu       sync.Mutex
	spans    [][]readySpan // by server
}

// readySpan is a time a server said it was not ready, and why (first
// reason).
type readySpan struct {
	from, to time.Time
	why      string
}

func watchReady(runs []*running) *readiness {
	r := &readiness{done: make(chan struct{}), finished: make(chan struct{}), spans: make([][]readySpan, len(runs))}
	go func() {
		defer close(r.finished)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		open := make([]bool, len(runs))
		for {
			select {
			case <-r.done:
				return
			case now := <-tick.C:
				r.mu.Lock()
				for i, run := range runs {
					err := run.srv.CheckReady()
					switch {
					case err != nil && !open[i]:
						r.spans[i] = append(r.spans[i], readySpan{from: now, to: now, why: err.Error()})
						open[i] = true
					case err != nil:
						r.spans[i][len(r.spans[i])-1].to = now
					default:
						open[i] = false
					}
				}
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// stop ends the polling and returns r, to describe.
func (r *readiness) stop() *readiness {
	r.stopOnce.Do(func() { close(r.done) })
	<-r.finished
	return r
}

// notReadyWithin reports whether server i said it was not ready at some
// time between from and to.
func (r *readiness) notReadyWithin(i int, from, to time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sp := range r.spans[i] {
		if !sp.to.Before(from) && !sp.from.After(to) {
			return true
		}
	}
	return false
}

// describe says, per server, when it said not ready relative to ref.
func (r *readiness) describe(ref time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for i, spans := range r.spans {
		if len(spans) == 0 {
			parts = append(parts, fmt.Sprintf("server %d ready throughout", i))
			continue
		}
		var ss []string
		for _, sp := range spans {
			ss = append(ss, fmt.Sprintf("not ready from %s to %s after the cut (%q)",
				sp.from.Sub(ref).Round(100*time.Millisecond), sp.to.Sub(ref).Round(100*time.Millisecond), sp.why))
		}
		parts = append(parts, fmt.Sprintf("server %d %s", i, strings.Join(ss, ", ")))
	}
	return strings.Join(parts, "; ")
}

// libraryLog is what the library logged, kept to report what it said
// during a fault.
type libraryLog struct {
	obs *observer.ObservedLogs
}

// between is the log lines from from to to, their times relative to ref,
// the same message repeated counted once with its count.
func (l *libraryLog) between(from, to, ref time.Time) string {
	var lines []string
	first := map[string]int{} // the line of each message's first entry
	count := map[string]int{}
	for _, e := range l.obs.All() {
		if e.Time.Before(from) || e.Time.After(to) {
			continue
		}
		ctx := e.ContextMap()
		if _, perMessage := ctx["id"]; perMessage {
			continue // a message's retry or end, not the library's state
		}
		key := fmt.Sprintf("%s %s %v", e.Level, e.Message, ctx["connection"])
		count[key]++
		if count[key] > 1 {
			continue
		}
		first[key] = len(lines)
		var fields []string
		for k, v := range ctx {
			fields = append(fields, fmt.Sprintf("%s=%v", k, v))
		}
		slices.Sort(fields)
		lines = append(lines, fmt.Sprintf("  +%s %s %s %s", e.Time.Sub(ref).Round(10*time.Millisecond), e.Level, e.Message, strings.Join(fields, " ")))
	}
	for key, n := range count {
		if n > 1 {
			lines[first[key]] += fmt.Sprintf(" (x%d)", n)
		}
	}
	if len(lines) == 0 {
		return "  nothing"
	}
	if len(lines) > 40 {
		lines = append(lines[:40], fmt.Sprintf("  (%d more)", len(lines)-40))
	}
	return strings.Join(lines, "\n")
}
