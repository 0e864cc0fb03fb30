package wire

import (
	"time"

	"github.com/acemq/acemq/transport"
)

// Envelope is acemq.Envelope field for field, with the same names, types
// and order, so that the root package converts one into the other
// (acemq.Envelope(wire.Read(d))) and this package need not import it. The
// fields are documented there.
type Envelope struct {
	ID            string
	Attempt       int
	Error         string
	CreatedAt     time.Time
	Redelivered   bool
	DeliveryCount int
	Snoozes       int
	Queue         string
	Exchange      string
	RoutingKey    string
	ContentType   string
	CorrelationID string
}

// Read reads a delivery's envelope: the contract's headers, falling back on
// the AMQP properties (message id, timestamp) and the broker's own fields.
// It makes nothing up, so that what an operator peeks at is what the queue
// holds: ID is empty when the message has neither x-acemq-id nor a message
// id, and CreatedAt zero when it has neither x-acemq-created nor a
// timestamp. A consumer that needs both fills them in itself.
func Read(d transport.Delivery) Envelope {
	h := d.Headers
	env := Envelope{
		Attempt:       1,
		Redelivered:   d.Redelivered,
		Queue:         d.Queue,
		Exchange:      d.Exchange,
		RoutingKey:    d.RoutingKey,
		ContentType:   d.ContentType,
		CorrelationID: d.CorrelationID,
	}
	if s, ok := String(h[ID]); ok && s != "" {
		env.ID = s
	} else {
		env.ID = d.MessageID
	}
	if n, ok := Int(h[Attempt]); ok && n > 1 && n < 1<<31 {
		env.Attempt = int(n)
	}
	if s, ok := String(h[Error]); ok {
		env.Error = s
	}
	if t, ok := Time(h[Created]); ok {
		env.CreatedAt = t
	} else {
		env.CreatedAt = d.Timestamp
	}
	if n, ok := Int(h[deliveryCount]); ok && n > 0 && n < 1<<31 {
		env.DeliveryCount = int(n)
	}
	if n, ok := Int(h[Snoozes]); ok && n > 0 && n < 1<<31 {
		env.Snoozes = int(n)
	}
	if s, ok := String(h[Exchange]); ok {
		env.Exchange = s
		if k, ok := String(h[RoutingKey]); ok {
			env.RoutingKey = k
		}
	}
	return env
}
