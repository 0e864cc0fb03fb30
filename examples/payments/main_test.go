package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/outbox"
)

// gateway times out the first `timeouts` calls for each card, then
// charges it, except the declined test card.
type gateway struct {
	timeouts int
	mu       sync.Mutex // the server's workers charge at once
	calls    map[string]int
}

// callsOf is how often card was charged.
func (g *gateway) callsOf(card string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[card]
}

func (g *gateway) Charge(_ context.Context, _, card string, _ int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls[card]++
	switch {
	case card == "4000 0000 0000 0002":
		return ErrDeclined
	case g.calls[card] <= g.timeouts:
		return ErrTimeout
	}
	return nil
}

// TestPayments: a charge that times out five times is retried on the
// ladder, its fifth wait on a rung, and settles once; its event reaches
// all three subscribers; a declined card is dead-lettered at once; a
// redelivered charge is not charged again. An hour of retries runs on the
// virtual clock.
func TestPayments(t *testing.T) {
	ctx := context.Background()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{})
	gw := &gateway{timeouts: 5, calls: map[string]int{}}
	svc, err := New(ctx, pool, gw)
	if err != nil {
		t.Fatal(err)
	}
	settled := make(chan string, 10)
	mux, queues := svc.Mux(func(subscriber string, e Settled) { settled <- subscriber + " " + e.PaymentID })
	ts := acemqtest.NewServer(t, mux, &acemq.Server{Retry: Policy, Queues: queues})
	relay, err := outbox.NewRelay(svc.Outbox, ts.Conn, outbox.WithPollInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	t.Cleanup(func() { stop(); <-done })

	id := t.Name() + time.Now().Format(".150405.000000")
	ts.Publish(t, Charges, Charge{PaymentID: id, Card: "4242 4242 4242 4242", Cents: 1250}, acemqtest.WithID(id))
	ts.Publish(t, Charges, Charge{PaymentID: id + ".declined", Card: "4000 0000 0000 0002", Cents: 99})
	if took := ts.RunUntilIdle(t); took < 28*time.Second { // 1+2+4+8 s ±20% in the process, 16 s on a rung
		t.Errorf("the ladder took %v of virtual time, want about 31 s", took)
	}
	if n := gw.callsOf("4242 4242 4242 4242"); n != 6 {
		t.Errorf("gateway charged the card %d times, want 6 (5 timeouts, 1 charge)", n)
	}
	if dead := ts.DeadLetters(Charges); len(dead) != 1 || dead[0].Reason() != "the handler rejected it: gateway: card declined" {
		t.Errorf("dead letters %v", dead)
	}
	got := map[string]bool{}
	for range Subscribers {
		select {
		case s := <-settled:
			got[s] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("the event reached %v only", got)
		}
	}
	for q := range Subscribers {
		if !got[q+" "+id] {
			t.Errorf("%s did not get the event (got %v)", q, got)
		}
	}

	ts.Publish(t, Charges, Charge{PaymentID: id, Card: "4242 4242 4242 4242", Cents: 1250}, acemqtest.WithID(id)) // redelivered
	ts.RunUntilIdle(t)
	var payments int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM payments WHERE id = $1", id).Scan(&payments); err != nil || payments != 1 || gw.callsOf("4242 4242 4242 4242") != 6 {
		t.Errorf("payments %d, gateway calls %d, %v; want 1 and 6", payments, gw.callsOf("4242 4242 4242 4242"), err)
	}
}
