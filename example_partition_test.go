package acemq_test

import (
	"fmt"

	"github.com/acemq/acemq"
)

// A partitioned queue's publishers send each key to its partition; the
// server's Queues entry with the same count consumes them all under one
// Mux entry (QueueConfig.Partitions).
func ExamplePartitioned() {
	orders := acemq.Partitioned{Queue: "orders", Count: 4}
	for _, customer := range []string{"customer-42", "customer-7", "customer-42"} {
		fmt.Println(customer, "→", orders.For(customer))
	}
	fmt.Println(orders.Queues())
	_ = acemq.QueueConfig{Partitions: orders.Count, Ordered: true, Args: map[string]any{"x-queue-type": "quorum"}}
	// Output:
	// customer-42 → orders.p2
	// customer-7 → orders.p1
	// customer-42 → orders.p2
	// [orders.p0 orders.p1 orders.p2 orders.p3]
}
