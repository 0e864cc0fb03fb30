package acemq_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// TestStalledBrokerBoundsUnknownCopies: a broker that takes publishes and
// confirms none (memory.Broker.Stall, as a node cut off from its
// cluster's majority) while eight handlers dead-letter at once. One copy
// at a time is sent and waits; the transport refuses the others unsent
// (ErrStalled), which the server holds and tries again as it would under
// a memory alarm, then gives back after the publish timeout. So a copy or
// two has an unknown outcome, not eight (each waiting the publish timeout
// in turn): acemq.publish.unconfirmed counts them, and they are exactly
// the copies that reach q.dlq when the broker goes on. The originals,
// given back, are accepted when redelivered; nothing is lost, and every
// duplicate in q.dlq is one counted.
func TestStalledBrokerBoundsUnknownCopies(t *testing.T) {
	t.Parallel()
	const n = 8
	gate := make(chan struct{})
	h := &recorder{answer: func(m *acemq.Message) ack.Ack {
		if m.Envelope().Redelivered {
			return ack.Accept()
		}
		<-gate
		return ack.DeadLetter(errors.New("no such customer"))
	}}
	f := start(t, &acemq.Server{PublishTimeout: 300 * time.Millisecond,
		Queues: map[string]acemq.QueueConfig{"q": {Concurrency: n}}}, map[string]acemq.Handler{"q": h})
	for i := range n {
		f.publish("q", fmt.Sprintf("m-%d", i), nil)
	}
	f.eventually("every handler waiting", func() bool { return h.count() == n })
	f.broker.Stall()
	close(gate)
	f.eventuallyWithin(time.Minute, "every original redelivered and accepted", func() bool {
		return h.count() == 2*n && f.broker.Unacked("q")+f.broker.Depth("q") == 0
	})
	if n := f.logs.FilterMessageSnippet("the broker is stalled").Len(); n == 0 {
		t.Error("no log line said the broker was stalled")
	}
	unknown := f.counter(acemq.MetricUnconfirmed, map[string]string{"queue": "q", "destination": "q.dlq"})
	if unknown < 1 || unknown > n/2 {
		t.Errorf("%d copies with an unknown outcome, want 1 to %d: the stall lets one through at a time", unknown, n/2)
	}
	if d := f.broker.Depth("q.dlq"); d != 0 {
		t.Errorf("q.dlq holds %d while the broker is stalled, want 0", d)
	}
	f.broker.Unstall()
	f.eventually("the copies with an unknown outcome in q.dlq", func() bool { return int64(f.broker.Depth("q.dlq")) == unknown })
	if err := f.conn.Check(); err != nil {
		t.Errorf("Check after Unstall: %v", err)
	}
}
