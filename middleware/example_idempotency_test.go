package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/middleware"
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
// claim in progress: not done, so it is retried rather than accepted. Once
// the dead consumer's lease ends, the retry does the work.
func ExampleIdempotent_inProgress() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now } // a clock the example moves by hand
	store := idempotency.NewMemory(6*time.Hour, idempotency.WithLease(time.Minute), idempotency.WithClock(clock))
	chargeCard := acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		fmt.Println("charged", m.ID())
		return ack.Accept()
	})
	h := middleware.Idempotent(store)(chargeCard)
	ctx := context.Background()
	m := acemq.NewMessage("payments", []byte(`{"amount":"12.00"}`), map[string]any{acemq.HeaderID: "pay-8"})

	_, _ = store.Claim(ctx, m.ID()) // the consumer that was killed

	a := h.ServeMessage(ctx, m)
	fmt.Println(a.Outcome(), errors.Is(a.Err(), idempotency.ErrInProgress))
	fmt.Println(a.Err())

	now = now.Add(time.Minute) // the retry ladder brings it back after the lease
	fmt.Println(h.ServeMessage(ctx, m).Outcome())
	// Output:
	// retry true
	// acemq: idempotency: message in progress elsewhere: id "pay-8" has an unsettled claim whose lease has not ended; the handler did not run
	// charged pay-8
	// accept
}
