package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/wire/wiretest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// wireContract is the document the other AceMQ libraries read; the golden
// tests hold what every publishing site puts on the wire to it.
const wireContract = "docs/wire-contract.md"

// arrivals is a handler that records the headers of every message it is
// given, as they arrived, and answers from a script.
type arrivals struct {
	mu     sync.Mutex
	got    []map[string]any
	answer func(m *acemq.Message) ack.Ack
}

func (a *arrivals) ServeMessage(_ context.Context, m *acemq.Message) ack.Ack {
	a.mu.Lock()
	a.got = append(a.got, m.Headers())
	a.mu.Unlock()
	return a.answer(m)
}

// nth waits for the n-th arrival (from 1) and returns its headers.
func (a *arrivals) nth(f *fixture, n int) map[string]any {
	f.t.Helper()
	f.eventually(fmt.Sprintf("arrival %d", n), func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.got) >= n
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got[n-1]
}

// checkWire fails the test for what the document says is wrong with the
// headers that arrived from site.
func checkWire(t *testing.T, doc wiretest.Doc, site string, h map[string]any, w wiretest.Want) {
	t.Helper()
	if err := doc.Check(h, w); err != nil {
		t.Errorf("%s, attempt %d:\n%v", site, w.Attempt, err)
	}
}

// TestWireGoldenEverySite follows messages through every place the library
// publishes from (the Publisher, a retry after an in-process wait, a rung,
// a dead letter, a park, a replay) and checks every x-acemq-* header that
// arrives against docs/wire-contract.md. outbox has its own for the relay.
func TestWireGoldenEverySite(t *testing.T) {
	t.Parallel()
	doc := wiretest.Load(t, wireContract)
	ctx := context.Background()

	t.Run("publish, in-process retries, dead letter, replay", func(t *testing.T) {
		t.Parallel()
		h := &arrivals{answer: func(*acemq.Message) ack.Ack { return ack.Retry(errBoom) }}
		f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Second)}, map[string]acemq.Handler{"orders": h})
		if err := f.conn.Declare(ctx, transport.Topology{
			Exchanges: []transport.Exchange{{Name: "shop", Kind: "direct", Durable: true}},
			Queues:    []transport.Queue{{Name: "orders.replayed", Durable: true}},
			Bindings:  []transport.Binding{{Queue: "orders", Exchange: "shop", Key: "placed"}},
		}); err != nil {
			t.Fatal(err)
		}
		created := f.broker.Clock().Now().UnixMilli() // the virtual clock stands still until advanced
		pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
		res, err := pub.Publish(ctx, acemq.Outgoing{Exchange: "shop", RoutingKey: "placed", Body: []byte("{}"), Headers: map[string]any{"tenant": "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		want := wiretest.Want{ID: res.ID, Attempt: 1, Created: created, Exchange: "shop", RoutingKey: "placed"}
		checkWire(t, doc, "Publisher.Publish", h.nth(f, 1), want)
		for attempt := 2; attempt <= 3; attempt++ {
			f.advance(1, time.Second)
			want.Attempt = int64(attempt)
			checkWire(t, doc, "a retry copy after an in-process wait", h.nth(f, attempt), want)
		}
		want.GivenUp = true // on the attempt it failed on
		checkWire(t, doc, "a dead letter", f.only("orders.dlq").Headers, want)

		moved, err := acemq.Replay(ctx, f.conn, "orders.dlq", acemq.ReplayOptions{To: "orders.replayed"})
		if err != nil || moved.Moved != 1 {
			t.Fatalf("Replay = %v, %v", moved, err)
		}
		want.Attempt, want.GivenUp = 1, false
		checkWire(t, doc, "Replay", f.only("orders.replayed").Headers, want)
	})

	t.Run("rung", func(t *testing.T) {
		t.Parallel()
		h := &arrivals{answer: func(m *acemq.Message) ack.Ack {
			if m.IsFirstAttempt() {
				return ack.Retry(errBoom)
			}
			return ack.Accept()
		}}
		f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Minute)}, map[string]acemq.Handler{"orders": h})
		created := f.broker.Clock().Now().UnixMilli()
		res := f.publish("orders", "{}", nil)
		want := wiretest.Want{ID: res.ID, Attempt: 1, Created: created, Exchange: "", RoutingKey: "orders"}
		checkWire(t, doc, "Publisher.Publish", h.nth(f, 1), want)
		want.Attempt = 2
		checkWire(t, doc, "a rung copy", f.only("orders.retry.1m").Headers, want)
		f.broker.Clock().Advance(time.Minute)
		checkWire(t, doc, "a rung copy home through acemq.retry", h.nth(f, 2), want)
	})

	t.Run("delay queues: a retry and a snooze", func(t *testing.T) {
		t.Parallel()
		h := &arrivals{answer: func(m *acemq.Message) ack.Ack {
			switch {
			case m.IsFirstAttempt():
				return ack.RetryAfter(time.Hour, errBoom)
			case m.Envelope().Snoozes == 0:
				return ack.Snooze(time.Hour)
			}
			return ack.Accept()
		}}
		f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Minute)}, map[string]acemq.Handler{"orders": h})
		created := f.broker.Clock().Now().UnixMilli()
		res := f.publish("orders", "{}", nil)
		want := wiretest.Want{ID: res.ID, Attempt: 1, Created: created, Exchange: "", RoutingKey: "orders"}
		checkWire(t, doc, "Publisher.Publish", h.nth(f, 1), want)
		want.Attempt = 2
		f.eventually("the retry waits on a level", func() bool { return onLevel(f.broker) != "" })
		f.broker.Clock().Advance(time.Hour)
		retried := h.nth(f, 2)
		checkWire(t, doc, "a retry on the delay queues", retried, want)
		if _, ok := retried[acemq.HeaderSnoozes]; ok {
			t.Errorf("a retry wrote %s", acemq.HeaderSnoozes)
		}
		f.eventually("the snooze waits on a level", func() bool { return onLevel(f.broker) != "" })
		f.broker.Clock().Advance(time.Hour)
		snoozed := h.nth(f, 3)
		checkWire(t, doc, "a snooze on the delay queues", snoozed, want)
		if n, ok := snoozed[acemq.HeaderSnoozes].(int64); !ok || n != 1 {
			t.Errorf("%s = %#v, want int64 1", acemq.HeaderSnoozes, snoozed[acemq.HeaderSnoozes])
		}
	})

	t.Run("park", func(t *testing.T) {
		t.Parallel()
		h := &arrivals{answer: func(*acemq.Message) ack.Ack { return ack.Park(errors.New("schema v9 unknown")) }}
		f := start(t, &acemq.Server{Retry: retry.Fixed(3, time.Second)}, map[string]acemq.Handler{"orders": h})
		created := f.broker.Clock().Now().UnixMilli()
		res := f.publish("orders", "{}", nil)
		checkWire(t, doc, "a park", f.only("orders.parked").Headers,
			wiretest.Want{ID: res.ID, Attempt: 1, Created: created, Exchange: "", RoutingKey: "orders", GivenUp: true})
	})
}
