package acemq

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/transport"
)

// The wire contract's headers, shared with every AceMQ library.
const (
	// HeaderID is the stable message id: the same across every retry, dead
	// letter, park and replay, and so the key for idempotency.
	HeaderID = "x-acemq-id"
	// HeaderAttempt is the 1-based delivery attempt; each retry adds one.
	HeaderAttempt = "x-acemq-attempt"
	// HeaderError is why a message was given up on, on dead letters and
	// parked messages.
	HeaderError = "x-acemq-error"
	// HeaderCreated is the creation time in Unix milliseconds, so that a
	// message's age survives republishing.
	HeaderCreated = "x-acemq-created"
	// HeaderExchange and HeaderRoutingKey keep where the message was first
	// published: after a rung expiry the broker shows acemq.retry instead.
	HeaderExchange   = "x-acemq-exchange"
	HeaderRoutingKey = "x-acemq-routing-key"
)

// brokerOwned are headers the broker writes. A republished copy must not
// carry them: a stale x-death naming the copy's queue makes RabbitMQ drop it
// as a dead-letter cycle, and CC/BCC would route it twice.
var brokerOwned = []string{"x-death", "x-delivery-count", "x-acquired-count", "CC", "BCC"}

func isBrokerOwned(key string) bool {
	for _, k := range brokerOwned {
		if key == k {
			return true
		}
	}
	return strings.HasPrefix(key, "x-first-death-") || strings.HasPrefix(key, "x-last-death-")
}

// newID returns a random 128-bit id in UUID form (version 4).
func newID() string {
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

// intHeader reads an integer header written by any family member: any Go
// integer or float type, or decimal digits in a string or bytes.
func intHeader(v any) (int64, bool) {
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

// stringHeader reads a string header, accepting bytes too.
func stringHeader(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}

// timeHeader reads the creation time: Unix milliseconds (the contract), a
// time.Time, or an RFC 3339 string from a lenient producer.
func timeHeader(v any) (time.Time, bool) {
	if t, ok := v.(time.Time); ok {
		return t, !t.IsZero()
	}
	if s, ok := stringHeader(v); ok {
		if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s)); err == nil {
			return t, true
		}
	}
	if ms, ok := intHeader(v); ok && ms > 0 {
		return time.UnixMilli(ms), true
	}
	return time.Time{}, false
}
