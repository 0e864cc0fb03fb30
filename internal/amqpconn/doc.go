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
package amqpconn
