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
//  1. Claim(id) before the handler. False: the message was handled, or is
//     being handled by another consumer right now. It is accepted and the
//     handler is not called.
//  2. The handler runs.
//  3. Confirm(id) when the handler accepted the message, so a later
//     redelivery is refused at step 1.
//  4. Release(id) on any other outcome (retry, dead letter, park, requeue, a
//     panic), so the retry is not mistaken for a duplicate.
//
// Claiming before the handler, not after, is what stops two consumers doing
// the same work at once, which is a real case at a concurrency above one.
//
// # Why release matters
//
// Step 4 is the one a hand-rolled deduplication gets wrong. Without it the
// first failure is the last attempt: the retry finds the id claimed and is
// accepted as a duplicate, and the message is lost without a dead letter.
// A claim that is neither confirmed nor released, because the process died
// mid-handler, blocks its id only until its lease ends ([WithLease]); then
// the broker's redelivery can be handled.
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
// A refused claim is accepted, and the handler is not called, but it is not
// invisible: middleware.Idempotent counts it on the OpenTelemetry counter
// acemq.idempotency.duplicates, calls an optional hook and writes a debug
// log line with the message id.
package idempotency
