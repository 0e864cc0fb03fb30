// Package rabbitmq is the acemq transport for RabbitMQ, on amqp091-go.
//
// The import path is github.com/acemq/acemq/transport/amqp but the package
// is named rabbitmq, so that it never has to be aliased next to amqp091-go,
// which is conventionally imported as amqp:
//
//	import (
//		amqp "github.com/rabbitmq/amqp091-go"
//		"github.com/acemq/acemq/transport/amqp" // package rabbitmq
//	)
//
//	t, err := rabbitmq.Dial(ctx, "amqp://guest:guest@localhost:5672/",
//		rabbitmq.WithConnectionName("orders"))
//
// # Connections
//
// A Transport holds a connection to declare (and Get), one to publish, and
// by default one more per subscription, to consume and acknowledge. A
// broker under a memory or disk alarm blocks a publishing connection and
// stops reading its socket; acknowledgements on the others still go
// through. While blocked, Publish fails at once with transport.ErrBlocked.
//
// A connection per subscription is what keeps one queue's bad delivery
// from hurting another: amqp091-go closes the whole connection on a
// delivery it cannot read (headers nested deeper than 32 or with more than
// 8192 entries, which RabbitMQ accepts), and every channel on it goes with
// it, unsent acknowledgements included. A connection that dies within 5 s
// of opening, again and again, reconnects with a growing wait, and the
// queue whose head holds such a delivery is logged and counted
// (Transport.Unreadable). WithConnectionPerConsumer(false) shares one
// connection among the subscriptions again, for hundreds of queues or a
// broker's connection limit.
//
// Every connection reconnects on its own, with backoff, moving on to the
// next node given with WithURLs, and every channel or connection lost is
// logged with the broker's code and reason. After a reconnect every
// topology that was declared successfully is declared again, in order, and
// every live subscription resumes on a new channel: its Deliveries channel
// carries on. Deliveries received before the reconnect are stale: settling
// them returns transport.ErrStaleDelivery and sends nothing (the broker
// redelivers them). A subscription whose queue was deleted (basic.cancel),
// whose vhost is gone or whose permission was withdrawn ends instead, and
// its Err says why, in the broker's words. A reconnect the broker refuses
// for now (530 "connection limit (N) is reached", 541 "vhost ... is
// down", a node not listening) ends nothing: it is dialled again with
// backoff, and ConsumeOptions.OnRefused is told (see Consume).
//
// # Channels
//
// Each subscription has its own channel, on probation at first (at
// basic.qos 1 while its deliveries are redelivered, so that a poison that
// takes the connection down charges a quorum queue's delivery limit alone;
// then a second consumer takes the rest of the prefetch: probation.go;
// not on a single-active-consumer queue, ConsumeOptions.SingleActive);
// deliveries are settled on the channel they arrived on. Acks
// are folded into multiple-acks, which costs the broker's queue process
// far less than an ack frame per message: acks wait up to a millisecond,
// or until a quarter of the prefetch is waiting, and then one frame
// settles the run of settled deliveries at the head of the channel. A
// multiple-ack never covers a delivery its handler has not finished with:
// an ack behind one still unsettled waits for it, and goes alone if it
// stays unsettled a whole millisecond more (a message waiting in the
// process) or three quarters of the prefetch waits behind it. Rejects
// always go alone, at once. Close sends the acks still waiting before it
// closes the channel.
//
// Each Declare and each Inspect runs on a short-lived channel of its own,
// so that a refusal (404 transport.ErrNotFound, 403
// transport.ErrAccessRefused, 406 transport.ErrPreconditionFailed) closes
// only that channel.
//
// # Publishing
//
// Publishes are spread over a pool of confirm-mode channels
// (WithPublishChannels) with at most WithInFlight of them awaiting a
// confirm. Publish returns once the broker confirmed: Routed is false when a
// mandatory message reached no queue (RabbitMQ returns it, then acks it).
// Returns are matched to their publish by the message's x-acemq-id when
// no other publish in flight on its channel has the same id, and otherwise
// by an x-acemq-publish-seq header that the transport adds to it and strips
// from every delivery: the message's own MessageID and headers stay the
// user's, and most messages go out without a header of the transport's.
// The limits count that header on every mandatory publish, so what is
// refused does not depend on what else is in flight. A nack is
// transport.ErrNacked, and retires its channel: the next publish opens a
// new one, and the old closes once its publishes in flight have settled
// (a channel opened while a quorum queue elects its leader can go on
// nacking what a new channel publishes fine). A confirm that did not come (the channel closed, ctx
// ended, WithConfirmTimeout passed) is transport.ErrUnconfirmed: the
// message may or may not have been stored, so never ack its source on it.
//
// # Draining
//
// Subscription.Cancel sends basic.cancel; Deliveries then yields what the
// broker had already sent and closes. Settle those, then Close the
// subscription, which closes its channel.
//
// # Passwords
//
// Passwords in broker URLs are redacted in every log line and every error.
package rabbitmq
