package middleware_test

import (
	"context"
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
