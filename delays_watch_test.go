package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// TestDelayExchangeDeletedIsDeclaredAgain: a level exchange deleted under
// a running server, while a message waits on the level above it, is
// noticed by the server's periodic check, counted, logged and declared
// again; the message, which the level above held to be dead-lettered
// (neither ready nor unacked) meanwhile, arrives at the broker's next
// offer, 3 minutes on.
func TestDelayExchangeDeletedIsDeclaredAgain(t *testing.T) {
	t.Parallel()
	h := &answers{acks: []ack.Ack{ack.Accept()}}
	srv := &acemq.Server{}
	acemq.SetRedeliverEvery(srv, 20*time.Millisecond) // a check every 60 ms
	f := start(t, srv, map[string]acemq.Handler{"orders": h})
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "orders", ID: "m-1", Body: []byte("m"), Delay: 3 * delay.Unit}); err != nil {
		t.Fatal(err) // 3 units: level 01, then level 00
	}
	f.broker.DeleteExchange(delay.Level(0))
	f.broker.Clock().Advance(2 * delay.Unit) // level 01's wait: it dead-letters into the missing exchange
	if held := f.broker.DeadLettering(delay.Level(1)); held != 1 {
		if _, back := f.broker.Exchange(delay.Level(0)); !back {
			t.Fatalf("level 01 holds %d to be dead-lettered, want 1", held)
		}
	}
	if f.broker.Depth(delay.Level(1)) != 0 || f.broker.Unacked(delay.Level(1)) != 0 {
		t.Error("the held message counts as ready or unacked")
	}
	f.eventuallyWithin(10*time.Second, "the server declares the level exchange again", func() bool {
		_, back := f.broker.Exchange(delay.Level(0))
		return back && f.counter(acemq.MetricRungMissing, map[string]string{"rung": delay.Level(0), "kind": "exchange"}) >= 1
	})
	f.eventuallyWithin(10*time.Second, "the redeclare is logged", func() bool {
		return f.logs.FilterMessageSnippet("declared the delay queues' missing parts again").Len() >= 1
	})
	f.broker.Clock().Advance(3*time.Minute + delay.Unit) // the broker's next offer, then level 00's wait
	f.eventually("the held message arrives", func() bool { return len(h.deliveries()) == 1 })
	if got := h.deliveries()[0].ID; got != "m-1" {
		t.Errorf("arrived %q", got)
	}
	if n := f.broker.DeadLettering(delay.Level(1)); n != 0 {
		t.Errorf("level 01 still holds %d", n)
	}
}

// TestDelayMissingWithoutDeclare: a server that does not declare finds a
// level queue and exchange deleted, counts and logs each with the command
// that declares them, and declares nothing.
func TestDelayMissingWithoutDeclare(t *testing.T) {
	t.Parallel()
	broker, conn := bare(t)
	ctx := context.Background()
	if err := conn.Declare(ctx, acemq.Topology("orders", retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	if err := conn.Declare(ctx, delay.Topology()); err != nil {
		t.Fatal(err)
	}
	srv := &acemq.Server{NoDeclare: true}
	acemq.SetRedeliverEvery(srv, 20*time.Millisecond)
	f := startOn(t, broker, srv, map[string]acemq.Handler{"orders": acemq.HandlerFunc(accept)})
	broker.DeleteExchange(delay.Level(4))
	broker.DeleteQueue(delay.Level(9))
	f.eventuallyWithin(10*time.Second, "both are counted missing", func() bool {
		return f.counter(acemq.MetricRungMissing, map[string]string{"rung": delay.Level(4), "kind": "exchange"}) >= 1 &&
			f.counter(acemq.MetricRungMissing, map[string]string{"rung": delay.Level(9), "kind": "queue"}) >= 1
	})
	f.eventuallyWithin(10*time.Second, "the fix is logged", func() bool {
		return f.logs.Filter(func(e observer.LoggedEntry) bool {
			return strings.Contains(e.Message, "this server does not declare") && strings.Contains(e.Message, "acemq topology --delays --apply")
		}).Len() >= 1
	})
	if _, ok := broker.Exchange(delay.Level(4)); ok {
		t.Error("declare off declared the level exchange")
	}
	if _, ok := broker.Queue(delay.Level(9)); ok {
		t.Error("declare off declared the level queue")
	}
}

// TestDelayedCopyRefusedAsksForACheck: a retry copy whose level exchange
// is missing waits in the process instead (not lost), and has the layout
// checked at once, without waiting for the periodic check: a server that
// does not declare logs the fix, naming the level the copy was refused
// by.
func TestDelayedCopyRefusedAsksForACheck(t *testing.T) {
	t.Parallel()
	broker, conn := bare(t)
	ctx := context.Background()
	if err := conn.Declare(ctx, acemq.Topology("orders", retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	if err := conn.Declare(ctx, delay.Topology()); err != nil {
		t.Fatal(err)
	}
	b, _ := delay.Bind("orders")
	if err := conn.Declare(ctx, transport.Topology{Bindings: []transport.Binding{b}}); err != nil {
		t.Fatal(err)
	}
	h := &answers{acks: []ack.Ack{ack.RetryAfter(time.Hour, errors.New("429")), ack.Accept()}}
	srv := &acemq.Server{NoDeclare: true, Retry: retry.Fixed(3, time.Second)}
	acemq.SetRedeliverEvery(srv, time.Hour) // no periodic check in this test
	f := startOn(t, broker, srv, map[string]acemq.Handler{"orders": h})
	route, _ := delay.RouteTo("orders", time.Hour)
	broker.DeleteExchange(route.Exchange)
	f.publish("orders", "m", nil)
	f.eventuallyWithin(10*time.Second, "the refused copy has the layout checked", func() bool {
		return f.logs.Filter(func(e observer.LoggedEntry) bool {
			return strings.Contains(e.Message, "acemq topology --delays --apply") && e.ContextMap()["publish_refused_by"] == route.Exchange
		}).Len() == 1
	})
	f.counterReaches(acemq.MetricRungMissing, map[string]string{"rung": route.Exchange, "kind": "exchange"}, 1)
	f.advance(1, time.Hour) // held in the process
	f.eventually("the retry arrives", func() bool { return len(h.deliveries()) == 2 })
}
