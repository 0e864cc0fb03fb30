package engine

import (
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// queueFor is queue's run as the root resolves it with declare on and the
// default concurrency and prefetch: what the decision's tests need.
func queueFor(queue string, p retry.Policy) *queueRun {
	return newQueueRun(Queue{Name: queue, Policy: p, Declare: true, Concurrency: 4, Prefetch: 32,
		DeadLetter: queue + ".dlq", Parked: queue + ".parked"})
}

// messageOf is the engine's message of d, its envelope read as Run reads
// it, with no handler's message beside it.
func messageOf(d transport.Delivery) message {
	env := wire.Read(d)
	return message{env: &env}
}
