// Package memory is an in-process broker that behaves like RabbitMQ 3.10,
// with a virtual clock, for tests, examples and benchmarks of code written
// against [transport.Transport].
//
//	b := memory.New()
//	t := b.Connect() // a transport.Transport and transport.Clocked
//	defer t.Close()
//	srv := &acemq.Server{Transport: t, Handler: mux}
//
// Where it disagrees with RabbitMQ, it is wrong: the conformance suite in
// transport/transporttest runs against both.
//
// # What it does like RabbitMQ
//
// The default exchange routes by queue name; direct, fanout, topic and
// headers exchanges route through bindings (a headers binding has no
// arguments here, so it matches everything). Exchange-to-exchange bindings
// and an exchange's alternate-exchange argument route as RabbitMQ's walk
// does: each exchange reached once, the alternate taken by an exchange
// whose bindings matched nothing (queues or exchanges), and a publish
// routed through an alternate counts as routed. Publishes are confirmed at
// once, or nacked by a full queue (see Length limits); a mandatory publish
// that reaches no queue is Routed false, a missing exchange is
// ErrNotFound. Consumers take turns (round-robin), each up to its
// prefetch, after a probation: one delivery at a time while they are
// redelivered, as the amqp transport consumes (probation.go); a
// rejected-with-requeue or given-back delivery returns redelivered: to its
// place among the ready messages of a classic queue, to the back of a
// quorum queue, or to the front of a quorum queue with an
// x-delivery-limit, and what a closed subscription or connection held to
// the front of any quorum queue (as RabbitMQ 3.10 does).
//
// Queue arguments: x-message-ttl (expiry from the head, in order),
// x-dead-letter-exchange and x-dead-letter-routing-key (expired and
// rejected messages are dead-lettered with RabbitMQ's x-death and
// x-first-death-* headers, and arrive showing the dead-letter exchange and
// key; cycles with no rejection in them are dropped), x-queue-type quorum
// (durable only, x-delivery-count on redeliveries, x-delivery-limit: every
// return counts, a reject with requeue, a closed subscription or
// connection, a consumer timeout, as RabbitMQ 3.10 counts basic.reject,
// basic.nack and a closed channel alike; past the limit the message is
// dead-lettered with reason delivery_limit, its count left behind), and
// on a quorum queue under reject-publish x-dead-letter-strategy
// at-least-once: a dead letter that cannot be placed (its exchange
// missing or routing nowhere, a cycle, a target refusing it) is held by
// the queue, uncounted by Depth, and offered again every 3 minutes
// (RabbitMQ's dead_letter_worker_publisher_confirm_timeout) until every
// target took it; a cycle is held for ever, as on RabbitMQ.
// x-single-active-consumer: the first consumer registered alone receives,
// one delivery at a time (the amqp transport's second consumer waits
// behind the others), and the next takes over when it is cancelled or
// closed (singleactive.go). A
// redeclare with different durability or arguments is ErrPreconditionFailed
// naming the queue and the argument, and changes nothing else; so is a bad
// value, in RabbitMQ's words. The Expiration property is honoured at the
// head, CC and BCC route, and a UserID other than [User] is refused.
//
// Headers reach a consumer in the types the amqp transport delivers them:
// int as int32 (int64 when it does not fit), unsigned integers one size
// wider and signed, nested tables as map[string]any, timestamps in whole
// UTC seconds. Each delivery has its own copy of headers and body.
//
// # Length limits
//
// x-max-length and x-max-length-bytes (message bodies) limit the ready
// messages of a queue; unacked ones do not count. With x-overflow
// drop-head, the default, the oldest ready messages are dropped to make
// room, dead-lettered with reason maxlen when the queue has a dead-letter
// exchange; a delivery given back to a full queue makes it drop one too
// (from a classic queue, itself: it went back to the head). With reject-publish a classic queue nacks a publish that would
// go over the limit (Publish returns ErrNacked; x-max-length 0 nacks
// every one), and the other queues the message was routed to keep their
// copies; reject-publish-dlx also dead-letters it. A quorum queue under
// reject-publish takes the message that goes over its limit and nacks the
// next ones until it is down to 80% of it; reject-publish-dlx on a quorum
// queue drops the head, as on RabbitMQ 3.10.
//
// # Faults
//
// [Broker.SetPublishFault] makes publishes fail the ways a real broker's
// can, for tests of the code that settles them: nacked, blocked by an
// alarm, a confirm that never comes with the message enqueued or not
// ([Fault]). [FaultNext] and [FaultEvery] aim faults at one queue.
//
// # Time
//
// The broker tells time by its [Clock]. The default virtual clock stands
// still until a test calls [Clock.Advance], which fires timers and expires
// messages in deadline order; [Clock.BlockUntil] waits until the code under
// test is asleep on the clock, so a test needs no real sleep. A server on a
// [Conn] tells time by the same clock ([transport.Clocked]).
// [WithRealClock] runs on wall time instead, for benchmarks and examples.
//
// # Goroutines
//
// None. Deliveries are pushed into each subscription's buffered channel as
// messages arrive and as earlier ones are settled, and expiries run inside
// Advance. Only a real clock runs timer callbacks, which [Broker.Close]
// stops and waits for.
//
// # Inspecting
//
// [Broker.Depth], [Broker.Unacked], [Broker.Peek], [Broker.Queue],
// [Broker.Exchange] and [Broker.Bindings] look at the broker without
// touching it; [Broker.DeleteQueue] and [Broker.Unbind] break it on
// purpose, to test what the code under test does then.
package memory
