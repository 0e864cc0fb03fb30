package faults_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/retry"
)

// TestFaultDelayedPublishPassingHeadersOn: chains of delayed hops, each
// published by the handler of the hop before it with that message's
// headers passed on (m.Headers(), as the Publisher.Propagator doc
// invites). Every hop came through the delay queues, so it carries the
// broker's x-death; each delay waits on levels the one before waited on.
// RabbitMQ confirms such a publish as routed and then drops the message as
// a dead-letter cycle when its walk enters a level x-death names, unless
// the publish strips what the broker owns: before it did, 20 of 20 chains
// were lost at their first hop. Every hop of every chain must arrive.
func TestFaultDelayedPublishPassingHeadersOn(t *testing.T) {
	url, _ := brokertest.FreshVhost(t, "", brokertest.SharedURL(t))
	log := testLogger(t)
	tr := dial(t, url, log)
	const queue, chains = "faults.passon", 20
	// 3 units wait on levels 1 and 0; 7 on 2, 1, 0; 5 on 2 and 0; 15 on 3 to 0.
	delays := []time.Duration{3 * delay.Unit, 7 * delay.Unit, 5 * delay.Unit, 15 * delay.Unit}
	hopID := func(chain, hop int) string { return fmt.Sprintf("chain-%02d/hop-%d", chain, hop) }
	var published []job
	for c := range chains {
		for hop := range len(delays) + 1 {
			published = append(published, job{ID: hopID(c, hop)})
		}
	}

	pub := &acemq.Publisher{Transport: tr, Mandatory: true}
	var mu sync.Mutex
	accepted, deaths := map[string]int{}, 0
	h := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		var chain, hop int
		if _, err := fmt.Sscanf(m.ID(), "chain-%02d/hop-%d", &chain, &hop); err != nil {
			return ack.DeadLetter(fmt.Errorf("not a hop of this scenario: %q", m.ID()))
		}
		if hop < len(delays) {
			headers := maps.Clone(m.Headers())
			headers["x-faults-hop"] = int64(hop + 1)
			res, err := pub.Publish(ctx, acemq.Outgoing{RoutingKey: queue, ID: hopID(chain, hop+1), Headers: headers, Delay: delays[hop], Body: []byte("hop")})
			if err != nil || !res.Routed {
				return ack.Retry(fmt.Errorf("publish the next hop: routed %v: %v", res.Routed, err))
			}
		}
		mu.Lock()
		defer mu.Unlock()
		accepted[m.ID()]++
		if m.Headers()["x-death"] != nil {
			deaths++
		}
		return ack.Accept()
	})
	srv := &acemq.Server{Retry: retry.Exponential(4, 100*time.Millisecond, time.Second)}
	serve(t, tr, queue, srv, h, log)

	for c := range chains {
		res, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: queue, ID: hopID(c, 0), Delay: delays[len(delays)-1], Body: []byte("hop")})
		if err != nil || !res.Routed {
			t.Fatalf("chain %d: publish its first hop: routed %v: %v", c, res.Routed, err)
		}
	}
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, j := range published {
			if accepted[j.ID] == 0 {
				return false
			}
		}
		return true
	}
	// Each chain needs about 4 s of delays; the rest is margin for a busy machine.
	polltest.Until(2*time.Minute, done)
	s := newSink(url, queue)
	mu.Lock()
	got := maps.Clone(accepted)
	sawDeaths := deaths
	mu.Unlock()
	tl := s.collect(t, "delayed-publish-passing-headers-on", published, got, srv.Retry)
	tl.report(t)
	if sawDeaths == 0 {
		t.Error("no hop carried x-death: the scenario no longer passes the broker's headers on")
	}
}
