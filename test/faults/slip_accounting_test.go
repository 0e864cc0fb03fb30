package faults_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/slip"
)

// slipDoc is the part of a slip's document (docs/wire-contract.md,
// "Routing slips (v1)") the accounting reads, decoded here rather than by
// package slip: the wire form is what is checked.
type slipDoc struct {
	V         int    `json:"v"`
	ID        string `json:"id"`
	State     string `json:"state"`
	Itinerary []string
	Visited   []struct {
		Stop string `json:"stop"`
	} `json:"visited"`
	Compensations []struct {
		Queue string `json:"queue"`
	} `json:"compensations"`
	Compensated []struct {
		Queue string `json:"queue"`
	} `json:"compensated"`
	Fault *slipFault `json:"fault"`
}

// slipMsg is one slip message the accounting took from a queue.
type slipMsg struct {
	queue, hop, event, reason string
	doc                       slipDoc
}

// slipSeen is every slip message taken from the queues watched, by slip
// id; messages with no readable slip under "".
type slipSeen struct {
	url string
	mu  sync.Mutex
	by  map[string][]slipMsg
}

func newSlipSeen(url string) *slipSeen { return &slipSeen{url: url, by: map[string][]slipMsg{}} }

// poll takes what queues hold now, on one channel; a broker that is away
// is tried again at the next poll.
func (s *slipSeen) poll(queues ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = raw(s.url, func(ch *amqp.Channel) error {
		for _, q := range queues {
			for {
				d, ok, err := ch.Get(q, false)
				if err != nil {
					var ae *amqp.Error
					if errors.As(err, &ae) && ae.Code == amqp.NotFound {
						return nil // a rung that was never declared: the channel is gone
					}
					return err
				}
				if !ok {
					break
				}
				m := slipMsg{queue: q}
				m.hop, _ = d.Headers[acemq.HeaderID].(string)
				m.event, _ = d.Headers[slip.EventHeader].(string)
				m.reason, _ = d.Headers["x-acemq-error"].(string)
				if v, ok := d.Headers[slip.Header].(string); !ok || json.Unmarshal([]byte(v), &m.doc) != nil {
					m.doc = slipDoc{}
				}
				s.by[m.doc.ID] = append(s.by[m.doc.ID], m)
				if err := d.Ack(false); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// settled reports whether every slip of orders has reached its end: an
// event, and for a faulted one the dead letter of the stop that failed.
func (s *slipSeen) settled(orders map[string]slipOrder) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range orders {
		// The stop whose dead letter must be there: where the faulted
		// event says the slip failed.
		var event bool
		failed := ""
		dead := map[string]bool{}
		for _, m := range s.by[id] {
			event = event || m.event != ""
			if m.event != "" && m.doc.Fault != nil {
				failed = m.doc.Fault.Stop
			}
			dead[m.queue] = true
		}
		if !event || (failed != "" && !dead[acemq.DeadLetterQueue(failed)]) {
			return false
		}
	}
	return true
}

// slipResult is what the accounting found.
type slipResult struct {
	slips, completed, faulted, compensated, half, lost, unexpected int
	duplicateEffects, duplicateEvents, deadlettered, extraDead     int
	parked, queued, kills                                          int
	problems                                                       []string
}

func (r *slipResult) problem(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// account classifies every slip from its messages and effects.
func (s *slipSeen) account(t *testing.T, orders map[string]slipOrder, queue func(string) string, effects map[string]int) *slipResult {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &slipResult{slips: len(orders)}
	for _, m := range s.by[""] {
		r.problem("a message in %s without a readable slip (x-acemq-id %q)", m.queue, m.hop)
	}
	for k, n := range effects {
		if n > 1 {
			r.duplicateEffects += n - 1
			r.problem("the work %q was done %d times", k, n)
		}
	}
	for _, id := range slices.Sorted(mapsKeys(orders)) {
		o := orders[id]
		done := func(stop string) bool { return effects[id+" "+stop] > 0 }
		var evs []slipMsg
		var dead, parked, queued int
		for _, m := range s.by[id] {
			switch {
			case m.queue == queue("events"):
				evs = append(evs, m)
			case strings.HasSuffix(m.queue, ".dlq"):
				dead++
				if m.queue != acemq.DeadLetterQueue(queue(o.FailAt)) || o.FailAt == "" {
					r.unexpected++
					r.problem("%s: a dead letter in %s, the script fails it at %q: %s", id, m.queue, o.FailAt, m.reason)
				}
			case strings.HasSuffix(m.queue, ".parked"):
				parked++
				r.problem("%s: parked in %s: %s", id, m.queue, m.reason)
			default:
				queued++
			}
		}
		if dead > 0 {
			r.deadlettered++
			r.extraDead += dead - 1
		}
		r.parked += parked
		if len(evs) > 1 {
			r.duplicateEvents += len(evs) - 1
		}
		if len(evs) == 0 {
			if dead+parked+queued == 0 {
				r.lost++
				r.problem("%s: lost: no event, in no queue (work done: %v)", id, s.workOf(id, effects))
			} else {
				r.queued++
				r.problem("%s: not settled: no event, %d dead letters, %d parked, %d queued", id, dead, parked, queued)
			}
			continue
		}
		if queued > 0 {
			r.problem("%s: %d copies left in the work queues after it settled (duplicate hops)", id, queued)
		}
		kinds := map[string]bool{}
		for _, e := range evs {
			kinds[e.event] = true
			if e.doc.State != e.event {
				r.problem("%s: a %s event whose slip is %s", id, e.event, e.doc.State)
			}
			if e.hop != id+"."+e.event {
				r.problem("%s: a %s event with the id %q", id, e.event, e.hop)
			}
		}
		ev := evs[0].doc
		compWork := done(slipRelease) || done(slipRefund)
		switch {
		case len(kinds) > 1:
			r.half++
			r.problem("%s: events of more than one kind: %v", id, slices.Sorted(mapsKeys(kinds)))
		case kinds[slip.StateCompleted]:
			r.completed++
			var visited []string
			for _, v := range ev.Visited {
				visited = append(visited, v.Stop)
			}
			want := []string{queue(slipReserve), queue(slipCharge), queue(slipShip)}
			if !done(slipReserve) || !done(slipCharge) || !done(slipShip) || !slices.Equal(visited, want) {
				r.problem("%s: completed, yet its work is %v and it visited %v", id, s.workOf(id, effects), visited)
			}
			if compWork || len(ev.Compensated) != 0 {
				r.half++
				r.problem("%s: completed, yet something was undone: %v", id, s.workOf(id, effects))
			}
			if o.FailAt != "" {
				r.unexpected++
				r.problem("%s: completed, yet its script fails it at %s", id, o.FailAt)
			}
		case kinds[slip.StateFaulted]:
			r.faulted++
			// What its stops registered, by the stop that failed, the
			// last registered run first.
			var wantComp []string
			var wantWork []string
			switch ev.Fault.stopOr() {
			case queue(slipShip):
				wantComp, wantWork = []string{slipRefund, slipRelease}, []string{slipReserve, slipCharge}
			case queue(slipCharge):
				wantComp, wantWork = []string{slipRelease}, []string{slipReserve}
			}
			var ran []string
			for _, c := range ev.Compensated {
				ran = append(ran, strings.TrimPrefix(c.Queue, prefixOf(queue)))
			}
			whole := slices.Equal(ran, wantComp) || (len(ran) == 0 && len(wantComp) == 0)
			for _, c := range slipCompensations {
				if done(c) != slices.Contains(wantComp, c) {
					whole = false
				}
			}
			for _, st := range slipStops {
				if done(st) != slices.Contains(wantWork, st) {
					r.problem("%s: faulted at %s, yet the work of %s done: %v", id, ev.Fault.stopOr(), st, done(st))
				}
			}
			if whole {
				r.compensated++
			} else {
				r.half++
				r.problem("%s: faulted at %s: compensated %v, want %v; its work %v", id, ev.Fault.stopOr(), ran, wantComp, s.workOf(id, effects))
			}
			if queue(o.FailAt) != ev.Fault.stopOr() {
				r.unexpected++
				r.problem("%s: faulted at %s (%s), its script fails it at %q", id, ev.Fault.stopOr(), ev.Fault.reasonOr(), o.FailAt)
			}
		default: // half-compensated
			r.faulted++
			r.half++
			r.problem("%s: a %v event: %+v", id, slices.Sorted(mapsKeys(kinds)), ev.Fault)
		}
	}
	return r
}

// prefixOf is the prefix queue puts before a stop's name, its dot included.
func prefixOf(queue func(string) string) string { return queue("") }

func (s *slipSeen) workOf(id string, effects map[string]int) map[string]int {
	out := map[string]int{}
	for _, st := range append(slices.Clone(slipStops), slipCompensations...) {
		if n := effects[id+" "+st]; n > 0 {
			out[st] = n
		}
	}
	return out
}

// slipFault is a slip's fault as the accounting reads it.
type slipFault struct {
	Stop         string `json:"stop"`
	Reason       string `json:"reason"`
	Compensation string `json:"compensation"`
}

// stopOr is the stop that failed, "" for no fault.
func (f *slipFault) stopOr() string {
	if f == nil {
		return ""
	}
	return f.Stop
}

func (f *slipFault) reasonOr() string {
	if f == nil {
		return ""
	}
	return f.Reason
}

// report prints the scenario's FAULT line and fails the test for a slip
// lost, half-compensated, ended where its script did not send it, work
// done twice, or anything unexplained.
func (r *slipResult) report(t *testing.T, name string) {
	t.Helper()
	line := fmt.Sprintf("FAULT %s: slips=%d completed=%d faulted=%d compensated=%d half=%d lost=%d duplicate_effects=%d duplicate_events=%d deadlettered=%d duplicate_deadletters=%d parked=%d queued=%d kills=%d",
		name, r.slips, r.completed, r.faulted, r.compensated, r.half, r.lost, r.duplicateEffects, r.duplicateEvents, r.deadlettered, r.extraDead, r.parked, r.queued, r.kills)
	fmt.Println(line)
	t.Log(line)
	if len(r.problems) > 0 {
		t.Logf("%s: %d findings: %s", name, len(r.problems), strings.Join(head(r.problems), "; "))
	}
	switch {
	case r.lost != 0, r.half != 0, r.unexpected != 0, r.queued != 0, r.parked != 0, r.duplicateEffects != 0:
		t.Errorf("%s: lost %d, half-compensated %d, not where the script sent them %d, not settled %d, parked %d, work done twice %d",
			name, r.lost, r.half, r.unexpected, r.queued, r.parked, r.duplicateEffects)
	case r.completed+r.faulted != r.slips || r.compensated != r.faulted:
		t.Errorf("%s: %d completed and %d faulted (%d of them compensated) of %d slips", name, r.completed, r.faulted, r.compensated, r.slips)
	}
	if r.kills == 0 {
		t.Errorf("%s: no consumer was killed", name)
	}
}
