// Package ack holds the outcome a handler returns for one message.
//
// # Outcomes
//
// A handler answers every message with an [Ack]. The server settles it:
//
//   - [Accept]: the message is done; the delivery is acknowledged.
//   - [Retry]: try again later, on the queue's retry ladder. With no attempts
//     left, no policy, or a [Fatal] error, the message is dead-lettered instead.
//   - [DeadLetter]: give up now; the message goes to "{queue}.dlq" with the reason.
//   - [Park]: set the message aside for a person; it goes to
//     "{queue}.parked". [Undecodable] does the same for a body that could
//     not be decoded, saying so.
//   - [Requeue]: put the delivery straight back, with no delay and no limit.
//     An explicit opt-in for the rare, obviously transient failure.
//
// The zero Ack is no answer at all: the server dead-letters the message
// with a reason that says the handler returned none, so a middleware that
// forgets to return its next handler's answer cannot acknowledge a message
// nobody handled.
//
// # Reasons
//
// Every message the library gives up on carries a reason in its
// x-acemq-error header. The prefixes are fixed across the AceMQ family, so
// an operator reading a dead-letter queue knows which limit was hit:
//
//	exhausted 5 attempts: the warehouse is not answering
//	exceeded the maximum message age of 6h0m0s: no answer in 30s
//	the handler rejected it: no such customer
//	the handler parked it: schema v9 is unknown here
//	could not be decoded: acemq: this message is not JSON: ...
//
// # Fatal errors
//
// [Fatal] marks an error that will not improve with time. A handler deep in a
// call stack can return one and the server honours the mark over a [Retry]
// request: the remaining attempts are skipped.
package ack
