// Package retry holds the retry policy: how many attempts a message gets, how
// long it waits between them, and where it waits.
//
// # The ladder
//
// A [Policy] is an immutable value. [Exponential] and [Fixed] build one; its
// settings come in pairs, an adjuster that returns a copy and a reader of
// the same name: [Policy.WithMaxAge] and [Policy.MaxAge],
// [Policy.WithJitter] and [Policy.Jitter], [Policy.WithBrokerWaitThreshold]
// and [Policy.BrokerWaitThreshold], [Policy.WithDelayQueues] and
// [Policy.DelayQueues], [Policy.WithMaxSnoozes] and [Policy.MaxSnoozes].
// Max attempts count the first delivery, so Exponential(5, ...) is one
// attempt and four retries.
//
// [Policy.Schedule] reports the delays without jitter, which is what to read
// when deciding whether a policy is the one you meant: five numbers are easier
// to argue with than four parameters.
//
// # Where the waiting happens
//
// A wait shorter than the broker-wait threshold (30 s unless changed) is spent
// in the consumer, holding the delivery. A wait at or above it is spent in the
// broker, on a rung queue named by [RungName] whose x-message-ttl is the wait
// and whose dead-letter target brings the message home. One rung per distinct
// delay, because RabbitMQ expires messages only from the head of a queue.
// Jitter applies below the threshold only: a rung's TTL is fixed when the
// queue is declared.
package retry
