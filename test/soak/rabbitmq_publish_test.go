package soak_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
)

// publishTries counts the publish tries that failed, by their error, and
// how long publishes took to be confirmed.
type publishTries struct {
	mu      sync.Mutex
	by      map[string]int
	slow    int           // publishes confirmed after more than slowPublish (held by an alarm, a reconnect)
	longest time.Duration // the longest a publish took to be confirmed, tries included
}

// slowPublish is what the publish summary counts as slow: far above a
// confirm's few milliseconds, as a publish held by a memory alarm or a
// reconnect is.
const slowPublish = 250 * time.Millisecond

func (p *publishTries) took(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d > slowPublish {
		p.slow++
	}
	p.longest = max(p.longest, d)
}

func (p *publishTries) add(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by = map[string]int{}
	}
	kind := "other"
	switch {
	case errors.Is(err, acemq.ErrUnroutable):
		kind = "unroutable"
	case errors.Is(err, transport.ErrUnconfirmed):
		kind = "unconfirmed"
	case errors.Is(err, transport.ErrNacked):
		kind = "nacked"
	case errors.Is(err, transport.ErrBlocked):
		kind = "blocked"
	case errors.Is(err, transport.ErrClosed):
		kind = "closed"
	}
	p.by[kind]++
}

func (p *publishTries) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	tries := "none"
	if len(p.by) > 0 {
		tries = faultLine(p.by)
	}
	return fmt.Sprintf("%s; %d publishes took over %v (the longest %v)", tries, p.slow, slowPublish, p.longest.Round(time.Millisecond))
}

// rabbitPublish is publish on a real broker: an error (a connection
// closed under it, the queue deleted and not yet declared again) is tried
// again after a short pause, as a service does, until the message is
// confirmed and routed, within wallWait.
func rabbitPublish(t *testing.T, pub *acemq.Publisher, l *ledger, id, q string, stats *publishTries) {
	t.Helper()
	l.publish(id, q)
	began := time.Now()
	deadline := began.Add(wallWait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_, err := pub.Publish(ctx, acemq.Outgoing{ID: id, RoutingKey: q, Body: []byte(`{"order":"` + id + `"}`)})
		cancel()
		if err == nil {
			stats.took(time.Since(began))
			return
		}
		stats.add(err)
		if time.Now().After(deadline) {
			t.Fatalf("soak: publish %s to %s: %v (tried for %v)", id, q, err, wallWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
