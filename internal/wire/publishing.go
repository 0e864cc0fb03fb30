package wire

import (
	"time"

	"github.com/acemq/acemq/transport"
)

// Origin is what a new message carries for the rest of its life: its id,
// when it was created and where it was first published.
type Origin struct {
	ID                   string
	Created              time.Time
	Exchange, RoutingKey string
}

// New stamps a new message, attempt 1, for publishing to o's exchange and
// routing key. The headers are copied, so that a caller's map (a user's,
// reused for the next message) is never written to, without what the broker
// owns (a handler that passes a consumed message's headers on passes its
// x-death, and RabbitMQ drops the new message as a dead-letter cycle when it
// enters a queue named there, after confirming the publish) and without
// what belongs to another message's life (its error, snoozes and due
// time). It is persistent and
// mandatory, so that a message reaching no queue is known either way; the
// AMQP message id and timestamp repeat the id and creation time for
// readers that know no x-acemq-* header. The caller's props give the rest
// (content type, correlation id).
func New(o Origin, headers map[string]any, props transport.Properties, body []byte) transport.Publishing {
	h := make(map[string]any, len(headers)+5)
	for k, v := range headers {
		if !IsBrokerOwned(k) && !ownedByAnother(k) {
			h[k] = v
		}
	}
	h[ID] = o.ID
	h[Attempt] = int64(1)
	h[Created] = createdBoxes.get(o.Created.UnixMilli()) // boxes.go
	h[Exchange] = exchangeBoxes.get(o.Exchange)
	h[RoutingKey] = keyBoxes.get(o.RoutingKey)
	props.DeliveryMode = 2
	props.MessageID = messageID(o.ID)
	props.Timestamp = o.Created.Truncate(time.Second) // AMQP carries whole seconds
	return transport.Publishing{
		Exchange:   o.Exchange,
		RoutingKey: o.RoutingKey,
		Mandatory:  true,
		Headers:    h,
		Properties: props,
		Body:       body,
	}
}

// ownedByAnother reports whether key is a contract header that describes
// another message's life, which a new message must not inherit: it has not
// been given up on, snoozed, or scheduled (delay.Aim sets its own due time).
func ownedByAnother(key string) bool {
	return key == Error || key == Snoozes || key == Due
}

// Forward builds a publishing of d as it is, to exchange with key: the
// body, properties and headers of d, without what the broker owns (a
// stale x-death would have RabbitMQ drop it as a dead-letter cycle), with
// no per-message TTL and no user id (another user's would be refused,
// 406). It is persistent and mandatory, so that a copy reaching no queue
// never lets the original be acked. extra is room for headers the caller
// adds.
func Forward(d transport.Delivery, exchange, key string, extra int) transport.Publishing {
	h := make(map[string]any, len(d.Headers)+extra)
	for k, v := range d.Headers {
		if !IsBrokerOwned(k) {
			h[k] = v
		}
	}
	props := d.Properties
	props.Expiration = "" // never a per-message TTL
	props.UserID = ""
	props.DeliveryMode = 2
	return transport.Publishing{Exchange: exchange, RoutingKey: key, Mandatory: true, Headers: h, Properties: props, Body: d.Body}
}

// Copy builds the copy of d that goes to queue by name (a retry, a rung, a
// dead letter, a park, a replay): d forwarded (Forward) to the default
// exchange, with env's id, creation time and first destination, this
// attempt, and reason as x-acemq-error (none when reason is empty, so that
// a replayed message does not keep a stale one).
func Copy(d transport.Delivery, env Envelope, queue string, attempt int, reason string) transport.Publishing {
	p := Forward(d, "", queue, 6)
	h := p.Headers
	h[ID] = env.ID
	h[Attempt] = int64(attempt)
	h[Created] = env.CreatedAt.UnixMilli()
	h[Exchange] = env.Exchange
	h[RoutingKey] = env.RoutingKey
	if reason != "" {
		h[Error] = reason
	} else {
		delete(h, Error)
	}
	if p.MessageID == "" {
		p.MessageID = messageID(env.ID)
	}
	return p
}

// maxShortString is what an AMQP short string (message-id among them)
// holds.
const maxShortString = 255

// messageID is id as the AMQP message-id property, or "" when it is too
// long for one: x-acemq-id, a long string, carries it whole anyway, and a
// short string over 255 bytes cannot be written at all.
func messageID(id string) string {
	if len(id) > maxShortString {
		return ""
	}
	return id
}

// maxTrimmedValue bounds a string header a trimmed copy keeps.
const maxTrimmedValue = 4096

// Trim cuts a copy down to what AMQP can always carry, for a copy that
// could not be written whole: only the wire contract's headers, strings
// among them cut to 4 KiB, and no short-string property over 255 bytes.
// The body is kept: it travels in frames of its own, whatever its size.
func Trim(p transport.Publishing) transport.Publishing {
	h := make(map[string]any, len(contract))
	for _, k := range contract {
		v, ok := p.Headers[k]
		if !ok {
			continue
		}
		if s, isString := v.(string); isString && len(s) > maxTrimmedValue {
			v = s[:maxTrimmedValue]
		}
		h[k] = v
	}
	p.Headers = h
	for _, f := range []*string{&p.ContentType, &p.ContentEncoding, &p.CorrelationID, &p.ReplyTo,
		&p.Expiration, &p.MessageID, &p.Type, &p.UserID, &p.AppID} {
		if len(*f) > maxShortString {
			*f = ""
		}
	}
	return p
}

// contract is every header of the wire contract.
var contract = [...]string{ID, Attempt, Error, Created, Exchange, RoutingKey}
