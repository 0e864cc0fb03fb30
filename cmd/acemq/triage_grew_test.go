package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/transport"
)

// hookedGets is a transport whose Gets call before first: a test makes the
// queue change at a chosen point of a command's read.
type hookedGets struct {
	transport.Transport
	before func()
}

func (h hookedGets) Get(ctx context.Context, queue string) (transport.Delivery, bool, error) {
	h.before()
	return h.Transport.Get(ctx, queue)
}

// grewScenario is issue 24's item 3: another reader has got the first
// held messages of a .dlq of 30 (20 of group A, 10 of B, interleaved),
// unacknowledged, when triage --discard A starts, and gives them back
// (reject, requeue) at the first Get of the move, after triage has read
// the 18 ready ones. Triage must count what it moves: all 20 of A moved
// (12 counted when read), 0 left, the queue grown by 12 (30 taken, 18
// ready before), 10 after; and every id in the archive (A) or the queue
// (B), none twice, none elsewhere.
type grewScenario struct {
	total, held int
	a, b        []string // ids of each group, in the order published
}

const (
	grewReasonA = "exhausted 5 attempts: POST https://wh.internal/reserve/%d: HTTP 503"
	grewReasonB = "the handler rejected it: no such customer"
)

func newGrewScenario() grewScenario {
	s := grewScenario{total: 30, held: 12}
	for i := range s.total {
		if i%3 == 2 {
			s.b = append(s.b, fmt.Sprintf("b-%d", i))
		} else {
			s.a = append(s.a, fmt.Sprintf("a-%d", i))
		}
	}
	return s
}

// seed publishes the 30 to q.dlq, in order.
func (s grewScenario) seed(t *testing.T, tr transport.Transport, q string) {
	t.Helper()
	created := time.Now().Add(-time.Hour)
	for i := range s.total {
		id, reason := fmt.Sprintf("a-%d", i), fmt.Sprintf(grewReasonA, 88000+i)
		if i%3 == 2 {
			id, reason = fmt.Sprintf("b-%d", i), grewReasonB
		}
		seedDeadLetter(t, tr, q, id, reason, created)
	}
}

// hold takes the first s.held messages on other and returns the function
// that gives them back, with requeue, once.
func (s grewScenario) hold(t *testing.T, other transport.Transport, q string) func() {
	t.Helper()
	var held []transport.Delivery
	for len(held) < s.held {
		d, ok, err := other.Get(context.Background(), acemq.DeadLetterQueue(q))
		if err != nil || !ok {
			t.Fatalf("the other reader's get: %v %v", ok, err)
		}
		held = append(held, d)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, d := range held {
				if err := d.Reject(true); err != nil {
					t.Errorf("the other reader's reject: %v", err)
				}
			}
		})
	}
}

// run runs the discard with dial, whose reading transport gives the held
// messages back (giveBack, then settled, until the broker counts them) at
// the first Get after triage's read of the ready ones, and checks what it
// printed.
func (s grewScenario) run(t *testing.T, dial dialer, u, q string, giveBack func(), settled func()) string {
	t.Helper()
	ready := s.total - s.held
	gets := 0
	var mu sync.Mutex
	hooked := func(ctx context.Context, url string) (transport.Transport, error) {
		tr, err := dial(ctx, url)
		if err != nil {
			return nil, err
		}
		return hookedGets{Transport: tr, before: func() {
			mu.Lock()
			defer mu.Unlock()
			if gets++; gets == ready+1 { // the read took the ready ones: this is the move's first
				giveBack()
				settled()
			}
		}}, nil
	}
	file := filepath.Join(t.TempDir(), "archive.jsonl")
	group := triage.ID(triage.Key(fmt.Sprintf(grewReasonA, 1)))
	code, out, errOut := cli(t, hooked, "triage", acemq.DeadLetterQueue(q), "--url", u, "--discard", group,
		"--why", "the load test's orders", "--operator", "alice", "--to-file", file, "--progress", "0")
	dlq := acemq.DeadLetterQueue(q)
	// Of A, 12 are among the 18 ready when triage read the queue.
	want := fmt.Sprintf("%s: group %s, 12 messages when read: 20 archived in %s, 0 left\n"+
		"%s: the queue grew by 12 while it was read (30 taken, 18 ready when triage began: another reader gave messages back, or new ones came); every one moved was of the group\n"+
		"%s: 18 messages ready before, 10 after\n", dlq, group, file, dlq, dlq)
	if code != 0 || out != want {
		t.Fatalf("triage --discard: status %d\n%s\nwant\n%s\nstderr:\n%s", code, out, want, errOut)
	}
	return file
}

// account checks that every id is in the archive (A) or the queue (B),
// once, and prints the scenario's FAULT line.
func (s grewScenario) account(t *testing.T, name string, archived, inQueue []string) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range slices.Concat(archived, inQueue) {
		seen[id]++
	}
	lost, dup := 0, 0
	for _, id := range slices.Concat(s.a, s.b) {
		switch seen[id] {
		case 0:
			lost++
		case 1:
		default:
			dup++
		}
	}
	slices.Sort(archived)
	slices.Sort(inQueue)
	wantA, wantB := slices.Sorted(slices.Values(s.a)), slices.Sorted(slices.Values(s.b))
	t.Logf("FAULT %s: published=%d archived=%d in-queue=%d lost=%d duplicates=%d", name, s.total, len(archived), len(inQueue), lost, dup)
	if !slices.Equal(archived, wantA) || !slices.Equal(inQueue, wantB) || len(seen) != s.total {
		t.Errorf("archived %v\nwant %v\nin the queue %v\nwant %v", archived, wantA, inQueue, wantB)
	}
}

// TestTriageDiscardWhileAnotherReaderRequeues is the scenario on the
// memory broker.
func TestTriageDiscardWhileAnotherReaderRequeues(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders")
	s := newGrewScenario()
	conn := b.Connect()
	t.Cleanup(func() { conn.Close() })
	s.seed(t, conn, "orders")
	giveBack := s.hold(t, conn, "orders")
	file := s.run(t, dial, "amqp://localhost", "orders", giveBack, func() {})
	s.account(t, "triage-discard-requeued-memory", archivedIDs(t, file), dlqIDs(b, "orders"))
}
