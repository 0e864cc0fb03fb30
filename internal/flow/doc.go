// Package flow is the pure core of acemq's flow control (issue 26): a
// circuit breaker per queue that stops taking deliveries while a
// dependency is down, so that messages wait in the broker instead of
// burning their retry ladder into "{queue}.dlq"; token-bucket rate limits
// that one queue or several share; and a cap on how many handlers run at
// once across a named group of queues.
//
// # Decide, then do
//
// Every answer is a value the engine acts on and a test compares: a
// [Decision] (may a delivery start now, and if not until when), an [Event]
// for each state change (from, to, when, why, the error), a [Status] for
// readiness and operators, a time from [Rate.Take] or [Rate.Reserve].
// Nothing here starts a goroutine or does I/O; time comes from a
// transport.Clock (the engine's, the memory transport's virtual clock in
// tests), and waiting is the engine's: on [Decision.Until] or
// [Decision.Wake] with its clock and its stop, off the worker. The only
// blocking calls are the conveniences [Rate.Wait] and [Group.Acquire].
// Not limiting costs no allocation and some tens of nanoseconds (the
// benchmarks report it against an empty loop).
//
// # The breaker
//
//	closed ──(failures/outcomes ≥ FailureRatio over the last Window, at least MinOutcomes)──► open
//	open ──(CoolDown over; the next Allow)──► half-open, up to Probes deliveries at once
//	half-open ──(a probe fails)──► open for another CoolDown
//	half-open ──(CloseAfter probe successes in a row)──► closed, with an empty window
//
// The defaults, against the peers the issue names (MassTransit's from
// KillSwitchOptions' constructor; its documentation's example uses 10
// messages, 15% and a minute):
//
//	setting       default  MassTransit kill switch   resilience4j  sony/gobreaker      NServiceBus
//	Window        20       attempts in 1m (period)   100           all since Interval  consecutive
//	MinOutcomes   20       100 (activation)          100           -                   (the user's count)
//	FailureRatio  50%      10% (trip)                50%           > 5 in a row        -
//	CoolDown      1m       60s (restart)             60s           60s (Timeout)       (the user's wait)
//	Probes        1        all (restarted)           10            1 (MaxRequests)     1 at a time
//	CloseAfter    3        -                         rate over 10  1                   -
//
// Ours counts every failed attempt, not every message: one message on a
// five-attempt ladder fills up to five slots, so a trip at 10% or 15%
// would stop a queue for one or two messages whose retries are the
// ladder's ordinary business; half of a full window of 20 takes at least
// two messages' whole ladders or half the traffic failing, the point
// where the ladder only burns attempts. A window of outcomes rather than
// of time keeps a quiet queue's ratio meaningful. The constants' comments
// ([DefaultWindow] and on) say the rest.
//
// Which failures count is [BreakerSettings.Counts], asked only about
// answers that want another try ([OutcomeOf]): by default ([DefaultCounts])
// every retry's error, but not an [ack.Fatal] one (the message's fault)
// nor one the stop caused (context.Canceled: a drain must not trip a
// breaker). A rejection, a park, a message too old, a snooze and a
// missing answer never count: the handler said the message was at fault,
// or nothing failed.
//
// Every [Permit] is reported once; a permit from before the breaker's last
// change is stale and changes nothing, so retries that were in flight
// when the breaker tripped finish without tripping it again or passing
// for probes.
//
// # Age while a breaker is open
//
// While a breaker is open its messages wait in the broker, and their age,
// taken from x-acemq-created, grows: a dependency down for an hour would
// otherwise make every message of a queue with a 30-minute MaxAge too old
// at its first delivery after recovery, and dead-letter it without one
// attempt: the damage the breaker is there to prevent. The proposal for
// the engine, which this package gives the means for:
//
//   - The retry policy's maximum age is judged on the age less the time
//     the queue's breaker held it: age − [Breaker.Held](createdAt), never
//     below zero, wherever the engine reads the age against the policy
//     (the TooOld check, NextWait, a chosen wait past the maximum). Time
//     held is open and half-open both: in half-open the queue still
//     admits one message at a time.
//   - The message's age as the handler sees it (and middleware.MaxAge,
//     the user's own limit) stays the true age: a user who wants "never
//     act on an order older than an hour" keeps it. acemq.Message could
//     carry the held time beside the age for a middleware that wants it.
//   - Attempts are not touched: a message that waits in the broker has
//     spent none.
//
// The ledger is per process and remembers the last [OutageMemory]
// outages: after a restart, or on another instance whose breaker did not
// trip, a message is judged on its full age, which is what happens today
// without a breaker. A message's first delivery after recovery is never
// too old for a reason the breaker caused, within that memory.
//
// # Rates and groups
//
// A [Rate] is a token bucket (Limit a second, Burst at once) on the
// engine's clock, shareable across queues; [Rate.Reserve] books a token
// and says when it is due, so the engine waits for it without a worker
// ([Rate.Cancel] hands it back on a stop). A [Group] caps concurrent
// handlers across queues; [Group.Acquire] waits until a slot is free, the
// context ends or the stop closes.
package flow
