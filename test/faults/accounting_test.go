package faults_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/retry"
)

// Accounting: where every published id ended, counted with a plain
// amqp091-go client so that no code of the library under test does it.

// raw runs f on a channel of a plain amqp091-go connection to url
// (brokertest.OnChannel): the accounting uses no code of the library under
// test.
var raw = brokertest.OnChannel

// depth is queue's count of ready messages, -1 when it cannot be read.
func depth(url, queue string) int {
	n := -1
	_ = raw(url, func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
		if err == nil {
			n = q.Messages
		}
		return err
	})
	return n
}

// drain takes every message from queue and returns how many of each id it
// held (the x-acemq-id header, else the correlation id). A missing queue
// holds nothing.
func drain(tb testing.TB, url, queue string) map[string]int {
	tb.Helper()
	got := map[string]int{}
	if err := drainInto(got, url, queue); err != nil {
		tb.Fatalf("drain %s: %v", queue, err)
	}
	return got
}

// drainInto is drain adding to got; what it took before an error is there.
func drainInto(got map[string]int, url, queue string) error {
	return raw(url, func(ch *amqp.Channel) error {
		for {
			d, ok, err := ch.Get(queue, false)
			if err != nil {
				var ae *amqp.Error
				if errors.As(err, &ae) && ae.Code == amqp.NotFound {
					return nil
				}
				return err
			}
			if !ok {
				return nil
			}
			got[deliveryID(d)]++
			if err := d.Ack(false); err != nil {
				return err
			}
		}
	})
}

func deliveryID(d amqp.Delivery) string {
	if s, ok := d.Headers[acemq.HeaderID].(string); ok && s != "" {
		return s
	}
	return d.CorrelationId
}

// tally accounts for every published id.
type tally struct {
	name      string
	published []job
	accepted  map[string]int // by the handler
	dlq       map[string]int // in .dlq, or the broker's own dead-lettering
	parked    map[string]int
	queued    map[string]int // still in the queue or on a rung
}

// sink takes a queue's dead letters and parked messages as they come,
// while a scenario waits for it to settle, and then everything else left.
type sink struct {
	url, queue string
	// graveyard is where the queue's own dead-lettering (its
	// x-dead-letter-exchange) sends what the library rejected: counted as
	// dead-lettered.
	graveyard string
	mu        sync.Mutex
	dlq       map[string]int
	parked    map[string]int
}

func newSink(url, queue string) *sink {
	return &sink{url: url, queue: queue, dlq: map[string]int{}, parked: map[string]int{}}
}

// poll takes what the .dlq and .parked hold now; a broker that is away is
// tried again at the next poll.
func (s *sink) poll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = drainInto(s.dlq, s.url, acemq.DeadLetterQueue(s.queue))
	_ = drainInto(s.parked, s.url, acemq.ParkedQueue(s.queue))
	if s.graveyard != "" {
		_ = drainInto(s.dlq, s.url, s.graveyard)
	}
}

// settled reports whether every job has reached its end: the accepted ones
// accepted, the dead letters and parked ones taken from their queues.
func (s *sink) settled(l *ledger, js []job) func() bool {
	return func() bool {
		s.poll()
		if !l.allAccepted(js) {
			return false
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, j := range js {
			switch j.expect() {
			case endDLQ:
				if s.dlq[j.ID] == 0 {
					return false
				}
			case endParked:
				if s.parked[j.ID] == 0 {
					return false
				}
			}
		}
		return true
	}
}

// collect takes what is left in the .dlq, .parked, the queue and its rungs
// into a tally with the handler's acceptances.
func (s *sink) collect(tb testing.TB, name string, published []job, accepted map[string]int, p retry.Policy) *tally {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	addAll(s.dlq, drain(tb, s.url, acemq.DeadLetterQueue(s.queue)))
	addAll(s.parked, drain(tb, s.url, acemq.ParkedQueue(s.queue)))
	if s.graveyard != "" {
		addAll(s.dlq, drain(tb, s.url, s.graveyard))
	}
	// Rungs first: a message that expires from a rung meanwhile is then
	// found in the queue.
	queued := map[string]int{}
	for _, d := range p.BrokerRungs() {
		addAll(queued, drain(tb, s.url, retry.RungName(s.queue, d)))
	}
	addAll(queued, drain(tb, s.url, s.queue))
	return &tally{name: name, published: published, accepted: accepted, dlq: s.dlq, parked: s.parked, queued: queued}
}

func addAll(into, from map[string]int) {
	for k, v := range from {
		into[k] += v
	}
}

// merge adds other's ids to tl, for a scenario over several queues.
func (tl *tally) merge(other *tally) {
	tl.published = append(tl.published, other.published...)
	for _, m := range []struct{ into, from map[string]int }{
		{tl.accepted, other.accepted}, {tl.dlq, other.dlq}, {tl.parked, other.parked}, {tl.queued, other.queued},
	} {
		addAll(m.into, m.from)
	}
}

// result is a tally's figures.
type result struct {
	published, delivered, deadlettered, parked, lost, duplicates, queued int
	lostIDs, unexpected, duplicateIDs                                    []string
}

func (tl *tally) result() result {
	r := result{published: len(tl.published)}
	for _, j := range tl.published {
		a, d, p, q := tl.accepted[j.ID], tl.dlq[j.ID], tl.parked[j.ID], tl.queued[j.ID]
		if a > 0 {
			r.delivered++
		}
		if d > 0 {
			r.deadlettered++
		}
		if p > 0 {
			r.parked++
		}
		// A copy still queued of an id that reached its end is a duplicate
		// (a redelivery whose ack was lost with its connection, left for
		// the next consumer), not work left undone.
		ends := a + d + p
		switch {
		case q > 0 && ends == 0:
			r.queued++
		case q > 0:
			r.duplicates += q
		}
		if ends > 1 {
			r.duplicates += ends - 1
		}
		if ends > 1 || (ends > 0 && q > 0) {
			r.duplicateIDs = append(r.duplicateIDs, fmt.Sprintf("%s (accepted %d, dlq %d, parked %d, queued %d)", j.ID, a, d, p, q))
		}
		switch {
		case a+d+p+q == 0:
			r.lostIDs = append(r.lostIDs, j.ID)
		case a+d+p == 0:
		case j.expect() == endAccepted && a == 0, j.expect() == endDLQ && d == 0, j.expect() == endParked && p == 0:
			r.unexpected = append(r.unexpected, fmt.Sprintf("%s (want %s; accepted %d, dlq %d, parked %d)", j.ID, j.expect(), a, d, p))
		}
	}
	r.lost = len(r.lostIDs)
	return r
}

// printLine prints the scenario's FAULT line, the one every scenario
// prints, to stdout (for the runs' logs) and to the test's log.
func (tl *tally) printLine(tb testing.TB, r result) {
	tb.Helper()
	line := fmt.Sprintf("FAULT %s: published=%d delivered=%d deadlettered=%d parked=%d lost=%d duplicates=%d",
		tl.name, r.published, r.delivered, r.deadlettered, r.parked, r.lost, r.duplicates)
	fmt.Println(line)
	tb.Log(line)
}

// report prints the scenario's FAULT line and fails the test if anything was
// lost, left queued, or ended where its script did not send it.
func (tl *tally) report(tb testing.TB) result {
	tb.Helper()
	r := tl.result()
	tl.printLine(tb, r)
	if r.duplicates != 0 {
		tb.Logf("%s: duplicates: %v", tl.name, head(r.duplicateIDs))
	}
	if r.lost != 0 {
		tb.Errorf("%s: %d messages lost: %v", tl.name, r.lost, head(r.lostIDs))
	}
	if r.queued != 0 {
		tb.Errorf("%s: %d messages still queued: the system did not settle", tl.name, r.queued)
	}
	if len(r.unexpected) != 0 {
		tb.Errorf("%s: %d messages ended where their script did not send them: %v", tl.name, len(r.unexpected), head(r.unexpected))
	}
	return r
}

func head(s []string) []string {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}

// expected counts js by where they should end.
func expected(js []job) map[string]int {
	out := map[string]int{}
	for _, j := range js {
		out[j.expect()]++
	}
	return out
}

// metrics is a meter provider with a reader to sum counters from.
type metrics struct {
	provider *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
}

func newMetrics() *metrics {
	r := sdkmetric.NewManualReader()
	return &metrics{provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), reader: r}
}

// counter sums the counter's points whose attributes include attrs.
func (m *metrics) counter(tb testing.TB, name string, attrs map[string]string) int64 {
	tb.Helper()
	return metrictest.Sum(tb, m.reader, name, attrs)
}
