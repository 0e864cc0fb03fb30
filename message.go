package acemq

import (
	"time"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// Envelope is what the library knows about a message beyond its body: the
// wire contract's headers read with safe defaults, and the broker's own view.
type Envelope struct {
	// ID is x-acemq-id, stable across retries, dead letters and replays. A
	// message from a producer that set none gets its AMQP message id, or a
	// new id that every later copy keeps.
	ID string
	// Attempt is x-acemq-attempt, counting from 1. It travels on the message,
	// so a restart does not reset it.
	Attempt int
	// Error is x-acemq-error: why a dead-lettered or parked message was given
	// up on. A message the broker dead-lettered itself (its delivery limit,
	// a TTL, a rejection, a full queue) carries no x-acemq-error: its reason
	// is read from the newest x-death entry instead. Empty on ordinary
	// deliveries.
	Error string
	// CreatedAt is when the message was first published; it survives
	// republishing, so age is the message's and not this attempt's.
	CreatedAt time.Time
	// Redelivered is the broker's flag: the same delivery handed back after a
	// consumer failed to settle it. A message can be on attempt 1 and
	// redelivered; the two are different things.
	Redelivered bool
	// DeliveryCount is a quorum queue's x-delivery-count (0 elsewhere).
	DeliveryCount int
	// Snoozes is x-acemq-snoozes: how many times a handler put the message
	// off with ack.Snooze, which spends no attempt (0 if never).
	Snoozes int
	// Queue is the queue the message was consumed from.
	Queue string
	// Exchange and RoutingKey are where the message was first published,
	// even after it came home from a rung through acemq.retry.
	Exchange   string
	RoutingKey string
	// ContentType and CorrelationID are the AMQP properties.
	ContentType   string
	CorrelationID string
}

// Message is one delivery as a handler sees it. It is immutable: handlers and
// middleware read it and must not change the slices and maps it returns.
type Message struct {
	env     wire.Envelope // Envelope, as the engine reads it (it keeps a pointer to it)
	body    []byte
	headers map[string]any
	now     func() time.Time
	newID   bool // the message carried no id: env.ID was made for this delivery
	// beforeDeadLetter is what the handler asked to run before a dead
	// letter (deadletter_hook.go); nil for none.
	beforeDeadLetter *deadLetterHook
	partition        Partition // the zero Partition for a queue that is not partitioned
}

// NewMessage builds the Message a handler would see for a delivery with these
// headers, reading the envelope exactly as the server does: missing or
// malformed headers get safe defaults. It is for tests of handlers and
// middleware; the time is the wall clock.
func NewMessage(queue string, body []byte, headers map[string]any) *Message {
	return newMessage(transport.Delivery{Queue: queue, RoutingKey: queue, Body: body, Headers: headers}, time.Now)
}

// EnvelopeOf reads a delivery's envelope as the server does: the wire
// contract's headers, falling back on the AMQP properties (message id,
// timestamp) and the broker's own fields. It is for looking at what sits
// in a queue, a .dlq an operator peeks at or a test's broker, so it makes
// nothing up: ID is empty when the message has neither x-acemq-id nor a
// message id, and CreatedAt zero when it has neither x-acemq-created nor a
// timestamp, where a server consuming it would give it a new id and the
// time it arrived.
func EnvelopeOf(d transport.Delivery) Envelope { return Envelope(wire.Read(d)) }

func newMessage(d transport.Delivery, now func() time.Time) *Message {
	env := wire.Read(d)
	newID := env.ID == ""
	if newID {
		env.ID = wire.NewID()
	}
	if env.CreatedAt.IsZero() {
		env.CreatedAt = now()
	}
	return &Message{env: env, body: d.Body, headers: d.Headers, now: now, newID: newID}
}

// Envelope returns a copy of the message's envelope.
func (m *Message) Envelope() Envelope { return Envelope(m.env) }

// ID returns the stable message id, the key for idempotency.
func (m *Message) ID() string { return m.env.ID }

// IDIsNew reports whether the message arrived with no id of its own
// (neither x-acemq-id nor an AMQP message-id, as from a foreign producer),
// so that ID was made up for this delivery: a redelivery would get another.
// Code that keys on the id (idempotency) returns ack.Retry(ErrNeedsID) for
// it, and the server stamps the id on before anything runs.
func (m *Message) IDIsNew() bool { return m.newID }

// Attempt returns the 1-based attempt number.
func (m *Message) Attempt() int { return m.env.Attempt }

// IsFirstAttempt is the readable form of Attempt() <= 1.
func (m *Message) IsFirstAttempt() bool { return m.env.Attempt <= 1 }

// Queue returns the queue the message was consumed from.
func (m *Message) Queue() string { return m.env.Queue }

// Partition says which partition of a partitioned queue (QueueConfig.Partitions)
// the message came from; the zero Partition for a queue that is not one.
// Queue is the partition's own queue (orders.p2), where its retries, dead
// letters and replays go; Partition().Queue the logical one (orders).
func (m *Message) Partition() Partition { return m.partition }

// Body returns the message body. Do not modify it.
func (m *Message) Body() []byte { return m.body }

// Header returns one header's value, nil when absent.
func (m *Message) Header(key string) any { return m.headers[key] }

// Headers returns a copy of the message's headers.
func (m *Message) Headers() map[string]any {
	out := make(map[string]any, len(m.headers))
	for k, v := range m.headers {
		out[k] = v
	}
	return out
}

// Age is how long ago the message was first published, by the server's
// clock. It survives retries: it is the message's age, not this attempt's.
func (m *Message) Age() time.Duration {
	age := m.now().Sub(m.env.CreatedAt)
	if age < 0 {
		return 0 // a producer's clock ahead of ours
	}
	return age
}
