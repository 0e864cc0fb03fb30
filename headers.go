package acemq

import "github.com/acemq/acemq/internal/wire"

// The wire contract's headers, shared with every AceMQ library.
const (
	// HeaderID is the stable message id: the same across every retry, dead
	// letter, park and replay, and so the key for idempotency.
	HeaderID = wire.ID
	// HeaderAttempt is the 1-based delivery attempt; each retry adds one.
	HeaderAttempt = wire.Attempt
	// HeaderError is why a message was given up on, on dead letters and
	// parked messages.
	HeaderError = wire.Error
	// HeaderCreated is the creation time in Unix milliseconds, so that a
	// message's age survives republishing.
	HeaderCreated = wire.Created
	// HeaderExchange and HeaderRoutingKey keep where the message was first
	// published: after a rung expiry the broker shows acemq.retry instead.
	HeaderExchange   = wire.Exchange
	HeaderRoutingKey = wire.RoutingKey
	// HeaderSnoozes counts the times a handler put the message off with
	// ack.Snooze, which spends no attempt; absent until the first.
	HeaderSnoozes = wire.Snoozes
)
