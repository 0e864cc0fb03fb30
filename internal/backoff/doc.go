// Package backoff spaces acemq's retries (AMQP reconnects and resubscribes,
// the outbox relay's retries) by a [Policy].
//
// # Why one package
//
// Every retry loop must answer the same questions: what a zero minimum
// means, what a cap below the minimum means, what happens after so many
// failures that doubling would overflow, and whether to jitter. Answered
// once here, and table-tested, they cannot drift apart between loops.
//
// # Time
//
// A wait runs on the [Clock] it is given, so that code driven by the memory
// transport's virtual clock backs off in virtual time and its tests advance
// the clock instead of sleeping. A nil Clock is the wall clock, whose timer
// is stopped when a wait is cut short, so that nothing outlives the wait.
package backoff
