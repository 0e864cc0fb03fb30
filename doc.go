// Package acemq is RabbitMQ messaging for services that must not lose a
// message, in the shape of net/http: a [Mux] routes queue names to
// [Handler]s, [Middleware] wraps them, and a [Server] consumes every queue
// and settles what each handler returns.
//
// # Handlers answer with an Ack
//
// A handler returns an ack.Ack: accept, retry (on the queue's ladder),
// dead-letter (to "{queue}.dlq", with a reason) or park (to
// "{queue}.parked"). The server settles it. A retry is a republish with
// x-acemq-attempt raised, never a requeue, so the count survives a restart.
// Short waits are spent in the process, long ones on a rung queue in the
// broker (see package retry).
//
// # Nothing is acknowledged before its copy is safe
//
// Every hop the library makes (retry, rung, dead letter, park) is a
// confirmed, mandatory publish by queue name. Only when the broker confirmed
// it and a queue took it is the original acknowledged. A copy the broker
// refused (its queue deleted, or full under reject-publish) counts
// acemq.messages.set.aside.failed and holds the original unacknowledged
// while the copy is tried again with backoff, declaring the queue again
// where the server may (acemq.messages.held counts what is held); only a
// queue with a dead-letter route of its own (x-dead-letter-exchange in its
// arguments) has the original rejected to that route instead. A copy whose
// fate is unknown gives the original back: a duplicate, never a loss.
//
// # At least once, and a stable id
//
// Delivery is at least once. x-acemq-id is stable across every retry, dead
// letter and replay, so a handler (or the idempotency middleware) can tell
// it has seen a message before.
//
// # Shutdown
//
// [Server.Shutdown] stops receiving, gives back what was delivered but not
// started, republishes at once what was waiting in the process, waits for
// running handlers until the deadline, and gives back (and reports with
// [ErrCutOff]) what the deadline cut off. The deadline bounds it even when
// a handler ignores its context: that handler's message goes back at the
// deadline, and its goroutine, the one goroutine that may outlive Run, ends
// when the handler returns, its answer discarded.
//
// # Testing
//
// The memory transport (package transport/memory) behaves like RabbitMQ,
// with a virtual clock: a five-minute ladder runs in milliseconds.
package acemq
