package soak_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
)

// ledger accounts for every published id, as test/faults' tally does:
// where each ended (handled, .dlq, .parked), what is still held in a queue
// at the end, what a queue's deletion destroyed (the operator's hand, not
// a loss of the library's), and from that what was lost and duplicated.
type ledger struct {
	mu        sync.Mutex
	published []string
	queue     map[string]string // where each id was published
	calls     map[string]int    // handler calls, by id: the scripts count attempts by it
	handled   map[string]int    // the handler returned Accept
	dlq       map[string]int
	parked    map[string]int
	held      map[string]int // still in a work queue, rung or delay queue at the end
	destroyed map[string]int // in a queue when the schedule deleted it
}

func newLedger() *ledger {
	return &ledger{
		queue: map[string]string{}, calls: map[string]int{}, handled: map[string]int{}, dlq: map[string]int{},
		parked: map[string]int{}, held: map[string]int{}, destroyed: map[string]int{},
	}
}

func (l *ledger) publish(id, queue string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.published = append(l.published, id)
	l.queue[id] = queue
}

// call counts a handler call of id and returns its number, from 1.
func (l *ledger) call(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[id]++
	return l.calls[id]
}

func (l *ledger) add(m map[string]int, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m[id]++
}

// figures are the ledger's counts, by id.
type figures struct {
	published, handled, dlq, parked, held, destroyed, lost, duplicates int
	lostIDs, duplicateIDs                                              []string
}

func (l *ledger) figures() figures {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := figures{published: len(l.published)}
	for _, id := range l.published {
		a, d, p, h, x := l.handled[id], l.dlq[id], l.parked[id], l.held[id], l.destroyed[id]
		if a > 0 {
			f.handled++
		}
		if d > 0 {
			f.dlq++
		}
		if p > 0 {
			f.parked++
		}
		ends := a + d + p
		switch {
		case ends == 0 && h > 0:
			f.held++
		case ends == 0 && x > 0:
			f.destroyed++
		case ends == 0:
			f.lostIDs = append(f.lostIDs, id)
		}
		// A copy held at the end of an id that reached its end is a
		// duplicate, as in test/faults.
		dup := max(ends-1, 0)
		if ends > 0 {
			dup += h
		}
		if dup > 0 {
			f.duplicates += dup
			f.duplicateIDs = append(f.duplicateIDs, fmt.Sprintf("%s (handled %d, dlq %d, parked %d, held %d)", id, a, d, p, h))
		}
	}
	f.lost = len(f.lostIDs)
	sort.Strings(f.duplicateIDs)
	return f
}

// story is one id's history, for a failure's message.
func (l *ledger) story(id string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%s (%s): calls %d, handled %d, dlq %d, parked %d, held %d, destroyed %d",
		id, l.queue[id], l.calls[id], l.handled[id], l.dlq[id], l.parked[id], l.held[id], l.destroyed[id])
}

// checkEnds fails t when a message is lost, telling each lost id's story,
// or still held once the run has drained: the bar both runs are held to.
func checkEnds(t *testing.T, f figures, seed uint64, story func(id string) string) {
	t.Helper()
	if f.lost != 0 {
		var stories []string
		for _, id := range head(f.lostIDs) {
			stories = append(stories, story(id))
		}
		t.Errorf("soak: %d messages lost (seed %d): %s", f.lost, seed, strings.Join(stories, "; "))
	}
	if f.held != 0 {
		t.Errorf("soak: %d messages still held after the drain (seed %d): the system did not settle", f.held, seed)
	}
}
