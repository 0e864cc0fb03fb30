package main

import (
	"context"
	"strconv"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/escape"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// scan reads up to limit messages (all depth of them when limit is 0),
// groups them, and gives them all back.
func (a *app) scan(t transport.Transport, queue string, depth, limit, excerpt int, every time.Duration, asJSON bool) (triageOut, error) {
	return a.scanSet(t, queue, []string{queue}, []int{depth}, false, limit, excerpt, every, asJSON)
}

// scanSet reads the queues of a set, each as scan reads one (up to limit
// messages in all, all of them when 0), groups their messages together,
// and gives them all back, each queue's once it is read. With
// partitioned, each message is grouped with the queue it was read from.
func (a *app) scanSet(t transport.Transport, name string, queues []string, depths []int, partitioned bool, limit, excerpt int, every time.Duration, asJSON bool) (triageOut, error) {
	out := triageOut{Queue: name, Groups: []triageGroup{}}
	total := 0
	for _, d := range depths {
		total += d
	}
	out.Depth = total
	if limit == 0 {
		limit = total
	}
	var g triage.Grouper
	prog := a.newProgress(name+": read", min(limit, total), progressOf(every, asJSON))
	var err error
	for i, q := range queues {
		src := triageSource{Queue: q, Depth: depths[i]}
		from := ""
		if partitioned {
			from = q
		}
		if want := limit - out.Read; want > 0 && err == nil && (depths[i] > 0 || len(queues) == 1) {
			if len(queues) > 1 {
				want = min(want, depths[i]) // each partition's share: what it held
			}
			done := out.Read
			src.Read, err = a.borrow(t, q, want, func(d transport.Delivery) {
				env := acemq.EnvelopeOf(d)
				g.Add(triage.Message{ID: env.ID, Reason: env.Error, Attempt: env.Attempt, Created: env.CreatedAt, DeadLettered: deadLettered(d.Headers), Body: d.Body, Queue: from})
				done++
				prog.set(done)
			})
			out.Read += src.Read
		}
		if partitioned {
			out.Partitions = append(out.Partitions, src)
		}
	}
	prog.stop()
	for _, gr := range g.Groups() {
		out.Groups = append(out.Groups, triageGroup{Group: gr, SampleBody: escape.Cut(string(gr.SampleBody), excerpt)})
	}
	return out, err
}

// settle waits, up to a few seconds, until queue shows at least depth
// ready messages, and returns how many it shows: what a read gave back is
// requeued by the broker after the give-back is sent, and a take (or a
// count) before that would miss it. It returns the last count it got, or
// unknownCount when it could get none (the broker gone, the node cut off
// from its cluster): never a 0 the broker did not say.
func (a *app) settle(t transport.Transport, queue string, depth int) int {
	last := unknownCount
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		info, err := t.Inspect(context.WithoutCancel(a.ctx), queue)
		if err == nil {
			last = info.Messages
		}
		if err != nil || info.Messages >= depth || !time.Now().Before(deadline) {
			return last
		}
	}
}

// unknownCount is a count the broker could not be asked for: "after"
// in --json, "unknown" in print (countAfter).
const unknownCount = -1

// countAfter prints a count settle returned.
func countAfter(n int) string {
	if n == unknownCount {
		return "unknown (the broker could not be asked)"
	}
	return strconv.Itoa(n)
}

// sumCounts adds counts settle returned: unknown if any is.
func sumCounts(a, b int) int {
	if a == unknownCount || b == unknownCount {
		return unknownCount
	}
	return a + b
}

// deadLettered is when the broker last dead-lettered a message: the time
// of the newest x-death entry.
func deadLettered(h map[string]any) time.Time {
	deaths, ok := h["x-death"].([]any)
	if !ok || len(deaths) == 0 {
		return time.Time{}
	}
	if d, ok := deaths[0].(map[string]any); ok {
		if t, ok := wire.Time(d["time"]); ok {
			return t
		}
	}
	return time.Time{}
}

// progressOf is how often a read or a move says how far it is: never
// under --json, whose output is the one document.
func progressOf(every time.Duration, asJSON bool) time.Duration {
	if asJSON {
		return 0
	}
	return every
}
