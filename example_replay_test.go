package acemq_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// After the warehouse is back, put back the dead letters that timed out on
// it; the one the handler rejected stays for a person to read.
func ExampleReplay() {
	b := memory.New()
	t := b.Connect()
	defer t.Close()
	ctx := context.Background()
	if err := t.Declare(ctx, acemq.Topology("shipping.orders", retry.None(), nil)); err != nil {
		fmt.Println(err)
		return
	}
	// Three dead letters, as a server leaves them.
	for i, reason := range []string{
		"exhausted 5 attempts: the warehouse is not answering: timeout",
		"the handler rejected it: no such customer",
		"exhausted 5 attempts: the warehouse is not answering: timeout",
	} {
		_, _ = t.Publish(ctx, transport.Publishing{
			RoutingKey: acemq.DeadLetterQueue("shipping.orders"),
			Headers: map[string]any{
				acemq.HeaderID:      fmt.Sprintf("order-%d", i+1),
				acemq.HeaderAttempt: 5,
				acemq.HeaderError:   reason,
			},
			Body: []byte(`{"sku":"A-1"}`),
		})
	}

	res, err := acemq.Replay(ctx, t, acemq.DeadLetterQueue("shipping.orders"), acemq.ReplayOptions{
		Limit: 500,
		Filter: func(env acemq.Envelope, body []byte) bool {
			return strings.Contains(env.Error, "timeout")
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res)
	for _, d := range b.Peek("shipping.orders") {
		env := acemq.EnvelopeOf(d)
		fmt.Printf("back in shipping.orders: %s, attempt %d\n", env.ID, env.Attempt)
	}
	for _, d := range b.Peek("shipping.orders.dlq") {
		fmt.Println("still dead-lettered:", d.Headers[acemq.HeaderID])
	}
	// Output:
	// moved 2, skipped 1 (drained)
	// back in shipping.orders: order-1, attempt 1
	// back in shipping.orders: order-3, attempt 1
	// still dead-lettered: order-2
}
