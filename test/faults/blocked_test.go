package faults_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
)

// TestFaultBlockedConnection is scenario 5: a memory alarm on the private
// node (set_vm_memory_high_watermark 0) blocks every connection that
// publishes. Publishing fails fast with a clear error, the server keeps
// accepting and acking what is queued (it consumes on a connection of its
// own), and everything resumes when the alarm clears.
//
// Every message here is accepted on its first attempt: the server itself
// needs no publish while blocked. Messages that do (retries, dead letters,
// parked) are the subject of the faultbugs-tagged variants.
func TestFaultBlockedConnection(t *testing.T) {
	js := jobs("blocked-connection", 300)
	for i := range js {
		js[i] = job{ID: js[i].ID}
	}
	blocked(t, "blocked-connection", js, false)
}

// blocked runs scenario 5 with js: two thirds published before the alarm,
// the rest after it clears. With warm, the server's transport has published
// before the alarm, as a server that has been running has.
func blocked(t *testing.T, name string, js []job, warm bool) {
	n := node.Get(t)
	n.Acquire(t)
	url, _ := n.FreshVhost(t)
	log := testLogger(t)
	q := "faults." + name
	before, after := js[:len(js)*2/3], js[len(js)*2/3:]
	l := newLedger()
	pol := testPolicy()
	srvTr := dial(t, url, log)
	pubTr := dial(t, url, log)
	ctx := context.Background()
	if err := pubTr.Declare(ctx, acemq.Topology(q, pol, nil)); err != nil {
		t.Fatal(err)
	}
	stats := &publishStats{}
	var sent []job
	if warm {
		// A server that has been running has its publish channels open:
		// open them with a few parked messages, then stop it. Its
		// transport stays.
		warmup := make([]job, 8)
		for i := range warmup {
			warmup[i] = job{ID: fmt.Sprintf("%s-warm-%d", name, i), Park: true}
		}
		sent = publishAll(t, pubTr, q, warmup, 4, 0, stats)
		first := serve(t, srvTr, q, &acemq.Server{Retry: pol}, l.handler(0), log)
		polltest.Within(t, 60*time.Second, "the warm-up messages are parked", func() bool {
			return depth(url, acemq.ParkedQueue(q)) == len(warmup)
		})
		if err := first.stop(t); err != nil {
			t.Fatal(err)
		}
	}
	sent = append(sent, publishAll(t, pubTr, q, before, 4, 0, stats)...)

	n.Ctl(t, "set_vm_memory_high_watermark", "0")
	alarmed := true
	t.Cleanup(func() {
		if alarmed {
			n.Ctl(t, "set_vm_memory_high_watermark", "0.4")
		}
	})
	// The broker blocks a connection when it next publishes: publish until
	// the transport has been told. These probes are unconfirmed or refused;
	// the message is published again after the alarm.
	pub := &acemq.Publisher{Transport: pubTr, Mandatory: true}
	probe := acemq.Outgoing{RoutingKey: q, ID: after[0].ID, Body: body(after[0])}
	polltest.Within(t, 60*time.Second, "the producer's connection is blocked", func() bool {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := pub.Publish(pctx, probe)
		return errors.Is(err, transport.ErrBlocked)
	})
	start := time.Now()
	_, err := pub.Publish(ctx, probe)
	took := time.Since(start)
	switch {
	case !errors.Is(err, transport.ErrBlocked):
		t.Errorf("Publish while blocked = %v, want ErrBlocked", err)
	case took > 2*time.Second: // a busy machine is slow; a publish that waited for the alarm would wait forever
		t.Errorf("Publish while blocked took %s; it should fail fast", took)
	case !strings.Contains(err.Error(), "blocked") || !strings.Contains(err.Error(), q):
		t.Errorf("the error does not say what happened: %v", err)
	}
	t.Logf("publish while blocked: %v (after %s)", err, took)

	// The server consumes on a connection the alarm does not block: it
	// keeps accepting and acking. A message that must be republished
	// (retried, dead-lettered, parked) cannot be while blocked: it goes back
	// to the broker. Watch how often the handler sees those meanwhile (a
	// hot loop would be thousands), and that they do not stop the others
	// from being accepted.
	// A message held for a blocked broker keeps its prefetch slot: leave room
	// for those beside the ones that need no publish.
	run := serve(t, srvTr, q, &acemq.Server{Retry: pol, PublishTimeout: 5 * time.Second, Prefetch: 100}, l.handler(time.Millisecond), log)
	atOnce := acceptedAtOnce(before)
	accepted := polltest.Until(60*time.Second, func() bool { return l.allAccepted(atOnce) })
	callsBefore, began := l.totalCalls(), time.Now()
	time.Sleep(2 * time.Second)
	loop := l.totalCalls() - callsBefore
	t.Logf("blocked: %d handler calls in %s for the %d messages that wait for a republish",
		loop, time.Since(began).Round(time.Millisecond), needRepublish(before))
	if !accepted {
		done := 0
		acc := l.acceptedCopy()
		for _, j := range atOnce {
			if acc[j.ID] > 0 {
				done++
			}
		}
		t.Errorf("while blocked only %d of the %d messages that need no republish were accepted within 60s: "+
			"the consumer stopped acking", done, len(atOnce))
	}
	if limit := needRepublish(before) * 40; loop > limit {
		t.Errorf("%d handler calls in 2s while blocked for %d messages that need a republish: a hot loop (want at most %d)",
			loop, needRepublish(before), limit)
	}
	if depth := depth(url, q); needRepublish(before) == 0 && depth != 0 {
		t.Errorf("%d messages still ready in %s while blocked: the consumer stopped", depth, q)
	}

	n.Ctl(t, "set_vm_memory_high_watermark", "0.4")
	alarmed = false
	sent = append(sent, publishAll(t, pubTr, q, after, 4, 10*time.Millisecond, stats)...)
	t.Logf("%s: producer: %s", name, stats)
	sk := newSink(url, q)
	if !polltest.Until(60*time.Second, sk.settled(l, sent)) {
		t.Errorf("%s: not settled within 60s", name)
	}
	if err := run.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
	sk.collect(t, name, sent, l.acceptedCopy(), pol).report(t)
}

// acceptedAtOnce are the jobs accepted on their first attempt.
func acceptedAtOnce(js []job) []job {
	var out []job
	for _, j := range js {
		if j.expect() == endAccepted && j.FailUntil <= 1 {
			out = append(out, j)
		}
	}
	return out
}

func needRepublish(js []job) int {
	return len(js) - len(acceptedAtOnce(js))
}
