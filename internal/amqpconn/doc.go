// Package amqpconn keeps one AMQP connection alive for transport/amqp.
//
// # Why not amqp091-go's own recovery
//
// amqp091-go's recovery replays consumers and confirm mode on channels it
// rebuilds behind the caller's back, so a delivery tag handed out before a
// reconnect could be acked on the new channel, acking the wrong message.
// Conn instead hands out a fresh *amqp.Connection after every loss; each
// user of it (a subscription, the publisher pool) opens new channels and
// knows that everything from the old ones is stale.
//
// # Lifecycle
//
// Open dials the first connection and starts one goroutine that watches it,
// redials with backoff on loss (moving on to the next URL of the cluster),
// runs the OnConnect hook and only then hands the new connection out.
// Close stops that goroutine and closes the connection; it returns when the
// goroutine has ended.
//
// # Refusals
//
// The broker can refuse a reconnect, and Classify decides from its words
// (rabbit_reader's, checked against RabbitMQ 3.10.8) whether that is for
// now or for good. For now (Transient): 530 "connection limit (N) is
// reached" for a vhost's or a user's max-connections or a node's
// connection_max, 541 "vhost ... is down", a TCP connection refused by a
// node that is booting, stopped or in maintenance. Conn dials again with
// backoff for as long as it lasts, logs the streak once and then at most
// every 30 s (at debug level while NotifyRefused has listeners, who say it
// in their own terms), reports it in Check and Refused, and tells
// NotifyRefused's listeners of each refusal and of the reconnect that ends
// them. For good (Permanent): 530 "vhost ... not found", 530 "access to
// vhost ... refused for user ..." and 403: Conn dials on, but
// ChannelUnlessRefused and ConnectionUnlessRefused give up with the
// broker's reply, so that a consumer ends with it instead of waiting for a
// vhost that may never come back. A resource alarm refuses no connection:
// the broker blocks it (connection.blocked), which Blocked and Check
// report.
package amqpconn
