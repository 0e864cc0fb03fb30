package middleware_test

import (
	"context"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/transport/memory"
)

// The same message delivered three times: the first attempt fails and is
// released, the retry does the work, and the redelivery after that is a
// duplicate: accepted, counted, not handled.
func ExampleIdempotent() {
	store := idempotency.NewMemory(6 * time.Hour)
	attempt := 0
	chargeCard := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		attempt++
		if attempt == 1 {
			fmt.Println("charge", m.ID(), "failed")
			return ack.Retry(fmt.Errorf("card service unavailable"))
		}
		fmt.Println("charged", m.ID())
		return ack.Accept()
	})
	onDuplicate := middleware.WithDuplicateHook(func(_ context.Context, m *acemq.Message) {
		fmt.Println("duplicate", m.ID())
	})
	h := middleware.Idempotent(store, onDuplicate)(chargeCard)

	m := acemq.NewMessage("payments", []byte(`{"amount":"41.90"}`), map[string]any{acemq.HeaderID: "pay-7"})
	for range 3 {
		fmt.Println(h.ServeMessage(context.Background(), m).Outcome())
	}
	// Output:
	// charge pay-7 failed
	// retry
	// charged pay-7
	// accept
	// duplicate pay-7
	// accept
}

// A consumer was killed between claiming a message and doing its work. The
// broker hands the message to the next consumer at once, which finds the
// claim in progress: not done, so it is not accepted, and not failing, so
// it spends no attempt. It is snoozed until the dead consumer's lease can
// have ended (the lease left, and a second); then it does the work.
func ExampleIdempotent_inProgress() {
	clock := memory.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) // a clock the example moves by hand
	store := idempotency.NewMemory(6*time.Hour, idempotency.WithLease(time.Minute), idempotency.WithClock(clock))
	chargeCard := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		fmt.Println("charged", m.ID())
		return ack.Accept()
	})
	h := middleware.Idempotent(store)(chargeCard)
	ctx := context.Background()
	m := acemq.NewMessage("payments", []byte(`{"amount":"12.00"}`), map[string]any{acemq.HeaderID: "pay-8"})

	_, _ = store.Claim(ctx, m.ID()) // the consumer that was killed
	clock.Advance(20 * time.Second)

	a := h.ServeMessage(ctx, m)
	wait, _ := a.After()
	fmt.Println(a.Outcome(), wait)

	clock.Advance(wait) // the snooze brings it back after the lease
	fmt.Println(h.ServeMessage(ctx, m).Outcome())
	// Output:
	// snooze 41s
	// charged pay-8
	// accept
}
