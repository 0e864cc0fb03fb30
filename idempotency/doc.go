// Package idempotency lets a handler run once per message rather than once
// per delivery. RabbitMQ delivers at least once and a retry hands the same
// message back, so a handler sees some messages again, on work that may be
// partly done; when the work is charging a card, that matters.
//
// The better answer, when it is available, needs nothing from this package:
// make the work itself idempotent. An INSERT ... ON CONFLICT DO NOTHING keyed
// on the message id, an update that sets a state rather than adding to it, a
// payment provider's own idempotency key: each is correct across instances
// and restarts, which is more than a store can promise.
//
// # Claim, handle, confirm or release
//
// A [Store] is keyed by the message's envelope id (acemq.Message.ID, the
// x-acemq-id header), which every retry, dead letter and replay keeps. The
// middleware.Idempotent middleware drives it:
//
//  1. Claim(id) before the handler. [Done]: the message was handled; it is
//     accepted and the handler is not called. [InProgress]: another
//     consumer holds an unsettled claim on it; the message waits until
//     that claim's lease can have ended (a snooze: no attempt spent), not
//     accepted, and the handler is not called. [Claimed]: go on.
//  2. The handler runs.
//  3. Confirm(id) when the handler accepted the message, so a later
//     redelivery is Done at step 1.
//  4. Release(id) on any other outcome (retry, dead letter, park, requeue, a
//     panic), so the retry is not mistaken for one in progress.
//
// Claiming before the handler, not after, is what stops two consumers doing
// the same work at once, which is a real case at a concurrency above one.
//
// # Why release matters
//
// Step 4 is the one a hand-rolled deduplication gets wrong. Without it the
// first failure would hold the id until its lease ends and every retry
// before then would find it in progress: with a lease longer than the retry
// ladder, the first failure would be the last attempt. (A hand-rolled one
// that accepts a refused claim does worse: it acks the retry, and the
// message is lost without a dead letter.)
//
// # In progress is not done
//
// A claim that is neither confirmed nor released says only that someone
// started the work. It may be running in another consumer, or it may have
// died with a consumer that was killed mid-handler, in which case the
// broker redelivers the message at once and nothing will ever do the work
// but this redelivery. Accepting an InProgress message as a duplicate
// loses that message, and so does spending its retry attempts on it (the
// ladder would run out before the lease and dead-letter work that never
// ran). So middleware.Idempotent snoozes it instead, for the lease the
// claim has left ([LeaseReporter]): it comes back once the other claim has
// been confirmed (Done), released (Claimed) or has run out its lease
// (Claimed), at no cost in attempts, whatever the ladder. The lease
// ([WithLease]) is the only thing that tells the store a claimer is gone.
// A message that finds its id in progress after several such waits, a
// claim live consumers keep taking, is retried with [ErrInProgress], and
// dead-lettered with its reason when the ladder ends: never lost, and
// replayable.
//
// # Memory, Postgres, or the handler's transaction
//
// [Memory] is per process and lost on restart: it deduplicates the
// redeliveries one running consumer sees, which is most of them, and nothing
// across instances or restarts. It is bounded by size, and [Memory.Evictions]
// counts the claims it had to forget early.
//
// [Postgres] is shared by every instance and survives restarts. Behind the
// middleware it still leaves a gap: the handler's work commits, then
// Confirm runs in another statement, and a crash between the two lets the
// work run again after the lease.
//
// [Postgres.ClaimTx] closes the gap. The handler begins a transaction on the
// same database as its work, claims the id inside it, does the work and
// commits: the claim and the work commit or roll back together. It needs
// the handler to own the transaction, so it is written by hand rather than
// configured; see the example.
//
// # Any id works
//
// Ids come from publishers, and a consumer may not control them, so both
// stores take any id but the empty one: a megabyte long, with NUL bytes,
// newlines, quotes, invalid UTF-8. A short printable ASCII id, such as the
// UUID acemq makes, is stored as it is; any other is stored as its
// SHA-256 ([Key] says exactly which). Refusing such an id instead would
// make a message fail, retry and be dead-lettered for want of a key, which
// no production user wants. An empty id is [ErrEmptyID]; the server never
// hands one to a handler.
//
// # Duplicates are counted
//
// A Done message is accepted, and the handler is not called, but it is not
// invisible: middleware.Idempotent counts it on the OpenTelemetry counter
// acemq.idempotency.duplicates, calls an optional hook and writes a debug
// log line with the message id. An InProgress one is counted on
// acemq.idempotency.in_progress, and its snooze logged at info level.
package idempotency
