package acemq_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
)

func ExampleServer_Decide() {
	srv := &acemq.Server{Retry: retry.Exponential(4, 10*time.Second, 0).WithJitter(0)}
	now := time.Now()
	down := errors.New("the warehouse is not answering")
	for attempt := 1; attempt <= 4; attempt++ {
		v := srv.Decide("orders", acemq.Envelope{Attempt: attempt, CreatedAt: now}, ack.Retry(down), now)
		if v.Cause != "" {
			fmt.Printf("attempt %d: %s to %s: %s\n", attempt, v.Cause, v.To, v.Reason)
			continue
		}
		fmt.Printf("attempt %d: wait %s in the %s, then attempt %d on %s\n", attempt, v.Wait, v.Where, v.Attempt, v.To)
	}
	v := srv.Decide("orders", acemq.Envelope{Attempt: 2, CreatedAt: now}, ack.Snooze(6*time.Hour), now)
	fmt.Printf("snooze: %s on the %s, attempt %d kept, snoozes %d\n", v.Wait, v.Where, v.Attempt, v.Snoozes)
	// Output:
	// attempt 1: wait 10s in the process, then attempt 2 on orders
	// attempt 2: wait 20s in the process, then attempt 3 on orders
	// attempt 3: wait 40s in the rung, then attempt 4 on orders.retry.40s
	// attempt 4: exhausted to orders.dlq: exhausted 4 attempts: the warehouse is not answering
	// snooze: 6h0m0s on the delay queues, attempt 2 kept, snoozes 1
}
