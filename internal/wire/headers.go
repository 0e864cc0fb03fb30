package wire

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/transport"
)

// The contract's header names, shared with every AceMQ library.
const (
	// ID is the stable message id: the same across every retry, dead letter,
	// park and replay, and so the key for idempotency.
	ID = "x-acemq-id"
	// Attempt is the 1-based delivery attempt; each retry adds one. It
	// travels on the message so that a restart does not reset it.
	Attempt = "x-acemq-attempt"
	// Error is why a message was given up on, on dead letters and parked
	// messages.
	Error = "x-acemq-error"
	// Created is the creation time in Unix milliseconds, so that a
	// message's age survives republishing.
	Created = "x-acemq-created"
	// Exchange and RoutingKey keep where the message was first published:
	// after a rung expiry the broker shows acemq.retry instead.
	Exchange   = "x-acemq-exchange"
	RoutingKey = "x-acemq-routing-key"
	// Due is when a message sent through the delay queues is due, Unix
	// milliseconds (int64).
	Due = "x-acemq-due"
	// Snoozes counts the times a handler put the message off without
	// spending an attempt (int64); absent until the first snooze.
	Snoozes = "x-acemq-snoozes"
)

// stamped are the contract's headers the library writes on every copy.
var stamped = [...]string{ID, Attempt, Error, Created, Exchange, RoutingKey, Due, Snoozes}

// IsStamped reports whether key is one of the contract's headers the
// library writes itself, which nothing else may set on a copy.
func IsStamped(key string) bool {
	for _, k := range stamped {
		if key == k {
			return true
		}
	}
	return false
}

// deliveryCount is a quorum queue's count of deliveries, the one header of
// the broker's that an envelope reads.
const deliveryCount = "x-delivery-count"

// brokerOwned are headers the broker writes. No message the library
// publishes, copy or new, may carry them: a stale x-death naming a queue
// the message will be dead-lettered into makes RabbitMQ drop it as a
// cycle, a stale x-received-from makes federation drop it as a loop, and
// CC/BCC would route it twice.
var brokerOwned = [...]string{"x-death", deliveryCount, "x-acquired-count", "x-received-from", "CC", "BCC"}

// IsBrokerOwned reports whether key is a header the broker writes, which a
// copy must not carry (see brokerOwned for why).
func IsBrokerOwned(key string) bool {
	for _, k := range brokerOwned {
		if key == k {
			return true
		}
	}
	return strings.HasPrefix(key, "x-first-death-") || strings.HasPrefix(key, "x-last-death-")
}

// NewID returns a random 128-bit id in UUID form (version 4), what the
// contract promises for an id the producer did not choose.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// Int reads an integer header written by any family member: any Go
// integer or float type, or decimal digits in a string or bytes, because
// reading is lenient where writing is exact.
func Int(v any) (int64, bool) {
	if n, ok := transport.Int64(v); ok {
		return n, true
	}
	switch n := v.(type) {
	case float32:
		return int64(n), n == n && n < 1<<62 && n > -(1<<62)
	case float64:
		return int64(n), n == n && n < 1<<62 && n > -(1<<62)
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		return i, err == nil
	case []byte:
		i, err := strconv.ParseInt(strings.TrimSpace(string(n)), 10, 64)
		return i, err == nil
	}
	return 0, false
}

// String reads a string header, accepting bytes too: AMQP's long string
// arrives as either, depending on the client that wrote it.
func String(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}

// Time reads the creation time: Unix milliseconds (the contract), a
// time.Time, or an RFC 3339 string from a lenient producer.
func Time(v any) (time.Time, bool) {
	if t, ok := v.(time.Time); ok {
		return t, !t.IsZero()
	}
	if s, ok := String(v); ok {
		if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s)); err == nil {
			return t, true
		}
	}
	if ms, ok := Int(v); ok && ms > 0 {
		return time.UnixMilli(ms), true
	}
	return time.Time{}, false
}
