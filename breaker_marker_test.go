package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// TestBreakerMarker: while the breaker is open the server keeps the marker
// queue the wire contract describes, exclusive, with the breaker's state
// in its arguments; half-open it says so, and open again with the new
// why; closed, and after the run, it is
// gone. Each change is a span of its own. A Reset during the cool-down
// consumes the queue again at once.
func TestBreakerMarker(t *testing.T) {
	t.Parallel()
	rec, tp := tracing(t)
	w := newWarehouse()
	release := make(chan struct{})
	h := acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		if string(m.Body()) == "probe" {
			<-release
		}
		return w.ServeMessage(ctx, m)
	})
	f := start(t, &acemq.Server{
		TracerProvider: tp,
		Retry:          retry.Fixed(3, 10*time.Second).WithJitter(0).WithBrokerWaitThreshold(time.Hour),
		Queues:         map[string]acemq.QueueConfig{"orders": {Breaker: &acemq.Breaker{CoolDown: time.Minute}}},
	}, map[string]acemq.Handler{"orders": h})
	name := acemq.BreakerMarker(f.srv, "orders")
	if !strings.HasPrefix(name, "orders.breaker.") {
		t.Fatalf("marker name %q, want orders.breaker.<instance>", name)
	}
	marker := func() (transport.Queue, bool) { return f.broker.Queue(name) }
	if _, ok := marker(); ok {
		t.Fatal("a marker stands while the breaker is closed")
	}

	tripped := f.broker.Clock().Now()
	if err := f.srv.TripBreaker("orders", "the warehouse is down for maintenance"); err != nil {
		t.Fatal(err)
	}
	f.eventually("the marker declared", func() bool { _, ok := marker(); return ok })
	q, _ := marker()
	if !q.Exclusive || q.Durable {
		t.Errorf("marker declared exclusive=%v durable=%v; want exclusive, not durable", q.Exclusive, q.Durable)
	}
	want := map[string]any{
		"x-acemq-breaker-queue": "orders", "x-acemq-breaker-state": "open",
		"x-acemq-breaker-since": tripped.UnixMilli(), "x-acemq-breaker-until": tripped.Add(time.Minute).UnixMilli(),
		"x-acemq-breaker-why": "the warehouse is down for maintenance", "x-max-length": int64(0),
		"x-overflow": "reject-publish", "x-queue-type": "classic",
	}
	for k, v := range want {
		got := q.Args[k]
		if n, ok := transport.Int64(got); ok {
			got = n
		}
		if fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("marker argument %s = %v (%T), want %v", k, q.Args[k], q.Args[k], v)
		}
	}
	if inst, _ := q.Args["x-acemq-breaker-instance"].(string); inst == "" || !strings.HasSuffix(name, "."+inst) {
		t.Errorf("x-acemq-breaker-instance %q is not the name's end (%s)", inst, name)
	}
	// Nothing can be stored in it.
	if _, err := f.conn.Publish(t.Context(), transport.Publishing{RoutingKey: name, Body: []byte("x")}); !errors.Is(err, transport.ErrNacked) {
		t.Errorf("a publish to the marker: %v, want it refused (nacked)", err)
	}

	spans := named(rec, "breaker orders")
	if len(spans) != 1 {
		t.Fatalf("%d breaker spans after the trip, want 1", len(spans))
	}
	attrs := map[string]string{}
	for _, kv := range spans[0].Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs[string(telemetry.AttrBreakerFrom)] != "closed" || attrs[string(telemetry.AttrBreakerTo)] != "open" ||
		attrs[string(telemetry.AttrBreakerWhy)] != "the warehouse is down for maintenance" {
		t.Errorf("the breaker span's attributes: %v", attrs)
	}

	// After the cool-down the first delivery probes: half-open, no until.
	f.publish("orders", "probe", nil)
	f.advance(1, time.Minute) // the supervisor's cool-down
	f.eventually("the marker says half-open", func() bool {
		q, ok := marker()
		return ok && q.Args["x-acemq-breaker-state"] == "half-open"
	})
	if q, _ := marker(); q.Args["x-acemq-breaker-until"] != nil {
		t.Errorf("a half-open marker has until %v", q.Args["x-acemq-breaker-until"])
	}
	close(release)
	f.eventually("the probe accepted", func() bool { all, _ := w.acceptedOnce(1); return all })
	if err := f.srv.TripBreaker("orders", "down again"); err != nil {
		t.Fatal(err)
	}
	f.eventually("the marker says open again", func() bool {
		q, ok := marker()
		return ok && q.Args["x-acemq-breaker-state"] == "open" && q.Args["x-acemq-breaker-why"] == "down again"
	})

	// A Reset during the cool-down: consumed again at once, no marker.
	if err := f.srv.ResetBreaker("orders", "the warehouse is back"); err != nil {
		t.Fatal(err)
	}
	f.eventually("the marker deleted", func() bool { _, ok := marker(); return !ok })
	f.publish("orders", "after the reset", nil)
	f.eventually("the order accepted without moving the clock", func() bool { all, _ := w.acceptedOnce(2); return all })

	// Tripped again, then the run ends: the marker goes with it.
	if err := f.srv.TripBreaker("orders", "down a third time"); err != nil {
		t.Fatal(err)
	}
	f.eventually("the marker declared again", func() bool { _, ok := marker(); return ok })
	if shutdownErr, runErr := f.stop(10 * time.Second); shutdownErr != nil || runErr != nil {
		t.Fatalf("Shutdown %v, Run %v", shutdownErr, runErr)
	}
	if _, ok := marker(); ok {
		t.Error("the marker outlived the run")
	}
}
