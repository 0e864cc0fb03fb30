package acemq_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// TestRabbitThrottleRateSharedByTwoQueues: on RabbitMQ, a throttle of 40
// handler starts a second named by two queues holds their starts together
// to 40 a second (the achieved rate over the run, as a ratio to the
// limit, within 10%), while a third queue, under no throttle, is handled
// long before them.
func TestRabbitThrottleRateSharedByTwoQueues(t *testing.T) {
	r := newRabbit(t)
	orders, refunds, audit := r.queue(), r.queue(), r.queue()
	var mu sync.Mutex
	var starts []time.Time
	auditDone := time.Time{}
	handled := map[string]int{}
	const each, limit = 60, 40.0
	h := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		mu.Lock()
		defer mu.Unlock()
		handled[m.Queue()]++
		if m.Queue() == audit {
			if handled[audit] == each {
				auditDone = time.Now()
			}
			return ack.Accept()
		}
		starts = append(starts, time.Now())
		return ack.Accept()
	})
	mux := acemq.NewMux()
	for _, q := range []string{orders, refunds, audit} {
		mux.Handle(q, h)
	}
	srv := &acemq.Server{
		Handler:     mux,
		Concurrency: 4,
		Throttles:   map[string]acemq.Throttle{"partner": {PerSecond: limit}},
		Queues: map[string]acemq.QueueConfig{
			orders:  {Throttles: []string{"partner"}},
			refunds: {Throttles: []string{"partner"}},
		},
	}
	r.serveMux(r.tr, srv)
	for i := range each {
		r.publish(orders, fmt.Sprint(i))
		r.publish(refunds, fmt.Sprint(i))
		r.publish(audit, fmt.Sprint(i))
	}
	r.eventually("every message handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handled[orders] == each && handled[refunds] == each && handled[audit] == each
	})
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// The first start takes the bucket's one token; the rest come at the rate.
	span := starts[len(starts)-1].Sub(starts[0])
	achieved := float64(len(starts)-1) / span.Seconds()
	ratio := achieved / limit
	t.Logf("%d starts in %s: %.1f a second, %.3f of the limit of %.0f", len(starts), span, achieved, ratio, limit)
	if ratio < 0.9 || ratio > 1.1 {
		t.Errorf("achieved %.3f of the limit, want within 10%%", ratio)
	}
	if !auditDone.Before(starts[len(starts)-1]) {
		t.Errorf("the unthrottled queue finished at %s, after the throttled ones: it was held back", auditDone.Sub(starts[0]))
	}
}
