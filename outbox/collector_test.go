package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// collector consumes a queue and keeps every delivery, acknowledged.
type collector struct {
	mu   sync.Mutex
	got  []transport.Delivery
	at   []time.Time
	more chan struct{}
}

func collect(tb testing.TB, tr transport.Transport, q string) *collector {
	tb.Helper()
	sub, err := tr.Consume(context.Background(), q, transport.ConsumeOptions{Prefetch: 500})
	if err != nil {
		tb.Fatalf("consume %s: %v", q, err)
	}
	c := &collector{more: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range sub.Deliveries() {
			now := time.Now()
			_ = d.Ack()
			c.mu.Lock()
			c.got, c.at = append(c.got, d), append(c.at, now)
			c.mu.Unlock()
			select {
			case c.more <- struct{}{}:
			default:
			}
		}
	}()
	tb.Cleanup(func() {
		_ = sub.Cancel(context.Background())
		_ = sub.Close()
		<-done
	})
	return c
}

// wait returns the deliveries once there are at least n, or fails the
// test after d.
func (c *collector) wait(tb testing.TB, n int, d time.Duration) []transport.Delivery {
	tb.Helper()
	deadline := time.After(d)
	for {
		c.mu.Lock()
		got := append([]transport.Delivery(nil), c.got...)
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-c.more:
		case <-deadline:
			tb.Fatalf("%d deliveries after %s, want %d", len(got), d, n)
		}
	}
}

// snapshot returns what has arrived so far.
func (c *collector) snapshot() ([]transport.Delivery, []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]transport.Delivery(nil), c.got...), append([]time.Time(nil), c.at...)
}

// percentile is the q-quantile of ds (nearest rank).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	for i := 1; i < len(s); i++ { // insertion sort: a few hundred values
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
