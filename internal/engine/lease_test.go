package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/acemq/acemq/transport"
)

// closings is a subscription that counts its closes.
type closings struct {
	mu sync.Mutex
	n  int
}

func (s *closings) Deliveries() <-chan transport.Delivery { return nil }
func (s *closings) Cancel(context.Context) error          { return nil }
func (s *closings) Err() error                            { return nil }
func (s *closings) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return nil
}
func (s *closings) closed() int { s.mu.Lock(); defer s.mu.Unlock(); return s.n }

// TestLease: a retired subscription closes once, when the last delivery
// taken from it ends, and not before; one with nothing out closes at once.
func TestLease(t *testing.T) {
	t.Parallel()
	sub := &closings{}
	l := newLease(sub, nil)
	l.take()
	l.take()
	l.retire()
	if sub.closed() != 0 {
		t.Fatal("closed with two deliveries out: their acks would fail")
	}
	l.done()
	if sub.closed() != 0 {
		t.Fatal("closed with one delivery out")
	}
	l.done()
	if sub.closed() != 1 {
		t.Fatalf("closed %d times once the last ended, want 1", sub.closed())
	}
	l.close()
	if sub.closed() != 1 {
		t.Fatalf("closed %d times, want once", sub.closed())
	}

	idle := &closings{}
	newLease(idle, nil).retire()
	if idle.closed() != 1 {
		t.Fatalf("an idle retired subscription closed %d times, want at once", idle.closed())
	}

	current := &closings{}
	c := newLease(current, nil)
	c.take()
	c.done()
	if current.closed() != 0 {
		t.Fatal("a subscription still consumed on closed when its deliveries ended")
	}
}

// TestLeaseConcurrent: deliveries ending on many goroutines while the
// lease is retired close it exactly once.
func TestLeaseConcurrent(t *testing.T) {
	t.Parallel()
	for range 50 {
		sub := &closings{}
		l := newLease(sub, nil)
		const n = 16
		for range n {
			l.take()
		}
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() { defer wg.Done(); l.done() }()
		}
		l.retire()
		wg.Wait()
		if sub.closed() != 1 {
			t.Fatalf("closed %d times, want once", sub.closed())
		}
	}
}
