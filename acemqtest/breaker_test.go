package acemqtest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/ack"
)

// TestBreakerTripAndProbe: a test trips a queue's breaker, sees its state,
// and moves the virtual clock through its cool-down: while open the
// messages wait in the broker and no handler runs; after the cool-down
// the probes succeed and the breaker closes.
func TestBreakerTripAndProbe(t *testing.T) {
	var handled atomic.Int64
	h := acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { handled.Add(1); return ack.Accept() })
	mux := acemq.NewMux()
	mux.Handle("orders", h)
	s := acemqtest.NewServer(t, mux, &acemq.Server{Breaker: &acemq.Breaker{CoolDown: time.Minute}})
	if err := s.Server.TripBreaker("orders", "the warehouse is down for maintenance"); err != nil {
		t.Fatal(err)
	}
	s.Advance(t, 0)
	for range 5 {
		s.Publish(t, "orders", []byte("order"))
	}
	s.Advance(t, 30*time.Second)
	if st := s.Server.Breakers(); len(st) != 1 || st[0].State != "open" || st[0].Why != "the warehouse is down for maintenance" {
		t.Fatalf("Breakers = %+v, want orders open, with the reason", st)
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("%d handled while the breaker was open", n)
	}
	if d := s.Broker.Depth("orders"); d != 5 {
		t.Fatalf("orders holds %d ready while open, want the 5 waiting in the broker", d)
	}
	s.RunUntilIdle(t)
	if n := handled.Load(); n != 5 {
		t.Errorf("%d handled after the cool-down, want 5", n)
	}
	if st := s.Server.Breakers(); st[0].State != "closed" {
		t.Errorf("the breaker is %s after 5 successful probes, want closed", st[0].State)
	}
	if err := s.Server.TripBreaker("payments", "x"); err == nil {
		t.Error("TripBreaker of a queue not served: no error")
	}
	if err := s.Server.ResetBreaker("orders", "x"); err != nil {
		t.Errorf("ResetBreaker: %v", err)
	}
}
