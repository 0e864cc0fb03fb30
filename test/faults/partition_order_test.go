package faults_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// Per-key order: what the handlers of a partitioned queue did, call by
// call, and which of each key's messages ended after a later one of the
// same key, and why.

// Headers a keyed message carries: its key and its place in the key's
// sequence, as its producer published it.
const (
	headerKey = "x-faults-key"
	headerSeq = "x-faults-seq"
)

// handling is one handler call, recorded when it returned.
type handling struct {
	id, key     string
	seq         int
	attempt     int
	redelivered bool // the broker's flag, or a delivery count above 0
	server      int
	partition   int
	outcome     ack.Outcome
	afterKill   bool
}

// orderLog records every handler call of every server, in the order the
// calls returned: with one handler at a time per partition, the order in
// which each partition's messages were handled.
type orderLog struct {
	mu     sync.Mutex
	calls  []handling
	killed bool
}

// record wraps h, the handler of server, noting each call once h returns.
func (o *orderLog) record(server int, h acemq.Handler) acemq.Handler {
	return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		a := h.ServeMessage(ctx, m)
		seq, _ := m.Header(headerSeq).(int64)
		key, _ := m.Header(headerKey).(string)
		env := m.Envelope()
		o.mu.Lock()
		o.calls = append(o.calls, handling{
			id: m.ID(), key: key, seq: int(seq), attempt: m.Attempt(),
			redelivered: env.Redelivered || env.DeliveryCount > 0,
			server:      server, partition: m.Partition().Index, outcome: a.Outcome(), afterKill: o.killed,
		})
		o.mu.Unlock()
		return a
	})
}

// markKill notes that every call returning from now on returned after the
// kill.
func (o *orderLog) markKill() {
	o.mu.Lock()
	o.killed = true
	o.mu.Unlock()
}

// Why a message ended after a later message of its key.
const (
	lateRetried     = "retried"         // it ended on a later attempt: a retry goes to the back of its partition
	lateRedelivered = "redelivered"     // it ended on a redelivery: its consumer died holding it
	latePublish     = "publish retried" // its producer published it more than once: the first copy may be the later one
	lateUnexplained = "unexplained"     // none of these: a defect
)

// orderReport is each key's order, as one view reads it, against its
// order of publishing.
type orderReport struct {
	view                      string // "ended" or "first handled"
	keys, inOrder, outOfOrder int
	late                      map[string]int      // late messages by cause
	examples                  map[string][]string // a few late messages by cause
	// strictInOrder counts the keys whose messages that were neither
	// retried nor redelivered (nor published more than once) came in
	// publish order among themselves: the promise.
	strictInOrder int
	// onRetry and onRedelivery count the messages whose chosen call was
	// on a later attempt, or a redelivery, late or not.
	onRetry, onRedelivery int
}

// Views of a message's place in its key's order.
const (
	viewEnded = "ended"         // the first call that did not ask for a retry: when its work was done
	viewFirst = "first handled" // the first call, whatever it answered
)

// callStats are the handler calls by server, partition and side of the
// kill.
func (o *orderLog) callStats() (all, afterKill int, by map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	by = map[string]int{}
	for _, c := range o.calls {
		when := "before"
		if c.afterKill {
			when = "after"
			afterKill++
		}
		by[fmt.Sprintf("server %d p%d %s", c.server, c.partition, when)]++
	}
	return len(o.calls), afterKill, by
}

// judge compares, for each key, the order of its messages as view reads
// it with the order they were published in (the seq header; each key's
// producer publishes its next message only once the broker confirmed the
// last). publishes says how many publish attempts each id took.
func (o *orderLog) judge(view string, publishes map[string]int) orderReport {
	o.mu.Lock()
	calls := slices.Clone(o.calls)
	o.mu.Unlock()
	r := orderReport{view: view, late: map[string]int{}, examples: map[string][]string{}}
	type place struct {
		at          int // index of the chosen call
		seq         int
		attempt     int
		redelivered bool
		firstCalls  int // calls on the first attempt
	}
	places := map[string]*place{}
	byKey := map[string][]string{}
	for i, c := range calls {
		p := places[c.id]
		if p == nil {
			p = &place{at: -1, seq: c.seq}
			places[c.id] = p
			byKey[c.key] = append(byKey[c.key], c.id)
		}
		if c.attempt <= 1 {
			p.firstCalls++
		}
		if p.at < 0 && (view == viewFirst || c.outcome != ack.OutcomeRetry) {
			p.at, p.attempt, p.redelivered = i, c.attempt, c.redelivered
		}
	}
	cause := func(id string, p *place) string {
		switch {
		case p.attempt > 1:
			return lateRetried
		case p.redelivered || p.firstCalls > 1:
			return lateRedelivered
		case publishes[id] > 1:
			return latePublish
		}
		return lateUnexplained
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		ids := slices.DeleteFunc(byKey[key], func(id string) bool { return places[id].at < 0 })
		slices.SortFunc(ids, func(a, b string) int { return places[a].seq - places[b].seq })
		r.keys++
		// A message is late when a message published after it came
		// before it: the least index among those after it is below its
		// own. The strict check looks only at the messages nothing
		// explains.
		late, strictLate := 0, false
		minAfter, strictMinAfter := len(calls), len(calls)
		for i := len(ids) - 1; i >= 0; i-- {
			p := places[ids[i]]
			c := cause(ids[i], p)
			switch {
			case p.attempt > 1:
				r.onRetry++
			case p.redelivered || p.firstCalls > 1:
				r.onRedelivery++
			}
			if p.at > minAfter {
				late++
				r.late[c]++
				if len(r.examples[c]) < 5 {
					r.examples[c] = append(r.examples[c], fmt.Sprintf("%s (seq %d, on attempt %d, redelivered %v, %d first-attempt calls, %d publishes)",
						ids[i], p.seq, p.attempt, p.redelivered, p.firstCalls, publishes[ids[i]]))
				}
			}
			minAfter = min(minAfter, p.at)
			if c == lateUnexplained {
				strictLate = strictLate || p.at > strictMinAfter
				strictMinAfter = min(strictMinAfter, p.at)
			}
		}
		if late == 0 {
			r.inOrder++
		} else {
			r.outOfOrder++
		}
		if !strictLate {
			r.strictInOrder++
		}
	}
	return r
}

func (r orderReport) String() string {
	var causes []string
	for _, c := range []string{lateRetried, lateRedelivered, latePublish, lateUnexplained} {
		causes = append(causes, fmt.Sprintf("%s=%d", strings.ReplaceAll(c, " ", "-"), r.late[c]))
	}
	return fmt.Sprintf("%s: keys=%d in-order=%d out-of-order=%d late: %s (of %d on a retry, %d on a redelivery); unretried and unredelivered in order: %d of %d keys",
		r.view, r.keys, r.inOrder, r.outOfOrder, strings.Join(causes, " "), r.onRetry, r.onRedelivery, r.strictInOrder, r.keys)
}

// reportOrder prints the scenario's ORDER line, both views, under its
// FAULT line and fails the test on a late message nothing explains, or on
// keys whose unretried, unredelivered messages did not come in publish
// order.
func reportOrder(tb testing.TB, name string, views ...orderReport) {
	tb.Helper()
	var parts []string
	for _, r := range views {
		parts = append(parts, r.String())
	}
	line := fmt.Sprintf("ORDER %s: %s", name, strings.Join(parts, " | "))
	fmt.Println(line)
	tb.Log(line)
	for _, r := range views {
		for _, c := range []string{lateRetried, lateRedelivered, latePublish, lateUnexplained} {
			if len(r.examples[c]) > 0 {
				tb.Logf("%s: %s late, %s: %v", name, r.view, c, r.examples[c])
			}
		}
		if r.late[lateUnexplained] != 0 || r.strictInOrder != r.keys {
			tb.Errorf("%s: %s: %d messages came after a later message of their key, neither retried, redelivered nor published twice: %v",
				name, r.view, r.late[lateUnexplained], r.examples[lateUnexplained])
		}
	}
}
