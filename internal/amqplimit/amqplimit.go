// Package amqplimit checks a publish against what AMQP 0-9-1 and amqp091-go
// can carry, before anything is written. Both transports use it, so that the
// memory transport refuses exactly what the amqp transport refuses.
//
// # Why before
//
// amqp091-go writes basic.publish and only then encodes the content header:
// a short string over 255 bytes (a message id, a header name) fails there,
// halfway through a publish, and the connection dies with every publish in
// flight on it. A content header frame larger than the negotiated frame_max
// makes RabbitMQ close the connection. And amqp091-go's reader refuses a
// table nested deeper than [MaxDepth] or a table or array of more than
// [MaxEntries] entries by closing the whole connection (501/502), though
// RabbitMQ took the message: written once, such a message poisons every
// consumer of its queue. Checked first, each is one refused publish.
//
// # Cost
//
// The check runs on every publish: one walk over the headers, sizing each
// value as amqp091-go's writer encodes it, with no allocation unless a
// limit is broken.
package amqplimit

import (
	"fmt"
	"math"
	"time"

	"github.com/acemq/acemq/transport"
)

// Limits of AMQP 0-9-1 and of amqp091-go v1.16's reader (read.go).
const (
	// ShortString is the most bytes an AMQP short string holds: every
	// string property but the headers, and every field name of a table.
	ShortString = 255
	// MaxDepth is how deeply amqp091-go reads nested tables and arrays
	// (maxFieldDepth): the headers table is level 0, a table or array in it
	// level 1, and a container at level 33 is refused.
	MaxDepth = 32
	// MaxEntries is how many entries amqp091-go reads in one table or
	// array (maxContainerElements). The reader counts each container on its
	// own, not the entries of all of them together.
	MaxEntries = 8192
	// FrameOverhead is what a frame adds to its payload: type, channel and
	// size (7 octets) and the frame-end octet. A payload fits a frame_max
	// of F when it is at most F - FrameOverhead.
	FrameOverhead = 8
	// DefaultFrameMax is RabbitMQ's default frame_max, which amqp091-go
	// also asks for.
	DefaultFrameMax = 131072
	// DeathMargin is room left in the content header frame for what the
	// broker adds when it dead-letters the message: RabbitMQ sends the
	// grown header on even when it no longer fits the frame, and
	// amqp091-go then closes the consumer's connection (501). A death adds
	// the x-death array (13 bytes) with one entry per queue and reason
	// (count, reason, queue, time, exchange, routing-keys; a repeated death
	// in the same queue for the same reason only counts up), and the first
	// time x-first-death-reason, -queue and -exchange. Measured on RabbitMQ
	// 3.10.8 at 255-byte names (TestDeathMargin), as the server's copies
	// meet it (published through the default exchange, so no exchange name
	// in the entry): one entry is 611 bytes, a rung's expiry adds 965 in
	// all, and a rejection into the dead-letter exchange after it 605 more,
	// 1,570. A copy drops the x-death it was made from, so that is the most
	// a message the server publishes carries to its next reader. 2 KiB
	// holds it, at 1.6% of the default frame; so does one death of a
	// message published through a named exchange of 255 bytes (1,475
	// bytes by the same count).
	DeathMargin = 2048
)

// headerFixed is the content header frame's payload before the
// properties: class id, weight, body size and property flags.
const headerFixed = 2 + 2 + 8 + 2

// Leaf sizes a header value of a type the walk does not know (in
// transport/amqp, amqp.Decimal): its encoded size including the type
// octet, and ok false for a type no AMQP table carries.
type Leaf func(v any) (size int, ok bool)

// Check returns the first limit a publish of props and headers breaks on a
// connection whose negotiated frame_max is frameMax (0: none), as a
// *transport.LimitError, and nil when it breaks none. headers hold the
// types transport.Publishing documents, or their amqp091-go conversions
// (tables of type T); leaf, if not nil, sizes any other. A value of a type
// neither knows is an error that is not a LimitError.
func Check[T ~map[string]any](props *transport.Properties, headers T, frameMax int, leaf Leaf) error {
	size, err := Measure(props, headers, leaf)
	if err != nil {
		return err
	}
	return Fit(size, frameMax)
}

// Measure checks every limit but the frame size and returns the encoded
// size of the content header frame's payload: what [Fit] compares to the
// frame size once the connection is known.
func Measure[T ~map[string]any](props *transport.Properties, headers T, leaf Leaf) (int, error) {
	n := headerFixed
	for _, s := range [...]struct {
		field, v string
	}{
		{"content-type", props.ContentType},
		{"content-encoding", props.ContentEncoding},
		{"correlation-id", props.CorrelationID},
		{"reply-to", props.ReplyTo},
		{"expiration", props.Expiration},
		{"message-id", props.MessageID},
		{"type", props.Type},
		{"user-id", props.UserID},
		{"app-id", props.AppID},
	} {
		if len(s.v) > ShortString {
			return 0, &transport.LimitError{Field: s.field, Size: len(s.v), Limit: ShortString}
		}
		if s.v != "" {
			n += 1 + len(s.v)
		}
	}
	if props.DeliveryMode > 0 {
		n++
	}
	if props.Priority > 0 {
		n++
	}
	if !props.Timestamp.IsZero() {
		n += 8
	}
	if len(headers) > 0 { // amqp091-go writes no empty table
		h, err := tableSize(headers, 0, "", leaf)
		if err != nil {
			return 0, err
		}
		n += h
	}
	return n, nil
}

// Fit checks a content header payload of size bytes ([Measure]) against
// frameMax, keeping [DeathMargin] free; frameMax 0 is no limit.
func Fit(size, frameMax int) error {
	if frameMax <= 0 {
		return nil
	}
	if limit := HeaderLimit(frameMax); size > limit {
		return &transport.LimitError{Field: "headers", Size: size, Limit: limit}
	}
	return nil
}

// HeaderLimit is the largest content header payload [Fit] lets through on
// a connection of frameMax (positive).
func HeaderLimit(frameMax int) int { return frameMax - FrameOverhead - DeathMargin }

// tableSize is the encoded size of m as a field table: its 4-byte length,
// then for each entry the name as a short string and the value with its
// type octet. top is the name of the header m is in ("" for the headers
// themselves), which a LimitError for a name too long in it gives.
func tableSize[T ~map[string]any](m T, depth int, top string, leaf Leaf) (int, error) {
	if len(m) > MaxEntries {
		return 0, &transport.LimitError{Field: "header-entries", Size: len(m), Limit: MaxEntries}
	}
	n := 4
	for k, v := range m {
		name := top
		if depth == 0 {
			name = k
		}
		if len(k) > ShortString {
			return 0, &transport.LimitError{Field: name, Size: len(k), Limit: ShortString}
		}
		s, err := valueSize[T](v, depth, name, leaf)
		if err != nil {
			return 0, err
		}
		n += 1 + len(k) + s
	}
	return n, nil
}

// valueSize is the encoded size of one field value at depth (that of the
// container holding it), type octet included. Integers are sized at the
// width the transports send them (internal/fieldvalue): an int as 32 bits
// when it fits, unsigned integers one size wider and signed.
func valueSize[T ~map[string]any](v any, depth int, top string, leaf Leaf) (int, error) {
	switch v := v.(type) {
	case nil:
		return 1, nil
	case bool, int8:
		return 2, nil
	case int16, uint8:
		return 3, nil
	case int32, uint16, float32:
		return 5, nil
	case int64, uint32, uint, uint64, float64, time.Time:
		return 9, nil
	case int:
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			return 5, nil
		}
		return 9, nil
	case string:
		return 5 + len(v), nil
	case []byte:
		return 5 + len(v), nil
	case T:
		return nestedTable(v, depth, top, leaf)
	case map[string]any: // T is amqp.Table: a map the caller did not convert
		return nestedTable(T(v), depth, top, leaf)
	case []any:
		if err := nested(depth, len(v)); err != nil {
			return 0, err
		}
		n := 5
		for _, e := range v {
			s, err := valueSize[T](e, depth+1, top, leaf)
			if err != nil {
				return 0, err
			}
			n += s
		}
		return n, nil
	case []string:
		if err := nested(depth, len(v)); err != nil {
			return 0, err
		}
		n := 5
		for _, e := range v {
			n += 5 + len(e)
		}
		return n, nil
	}
	if leaf != nil {
		if n, ok := leaf(v); ok {
			return n, nil
		}
	}
	return 0, fmt.Errorf("unsupported header type %T", v)
}

func nestedTable[T ~map[string]any](m T, depth int, top string, leaf Leaf) (int, error) {
	if err := nested(depth, 0); err != nil {
		return 0, err
	}
	n, err := tableSize(m, depth+1, top, leaf)
	return 1 + n, err
}

// nested checks a container of entries entries one level below depth.
func nested(depth, entries int) error {
	if depth+1 > MaxDepth {
		return &transport.LimitError{Field: "header-depth", Size: depth + 1, Limit: MaxDepth}
	}
	if entries > MaxEntries {
		return &transport.LimitError{Field: "header-entries", Size: entries, Limit: MaxEntries}
	}
	return nil
}

// SeqHeader is the header transport/amqp adds to a mandatory publish, an
// int64 that matches a basic.return to it. It counts against the limits
// like any other: the memory transport counts it with [AddSeq].
const SeqHeader = "x-acemq-publish-seq"

// seqEntry is SeqHeader's entry in the headers table: its name as a short
// string and an int64 with its type octet.
const seqEntry = 1 + len(SeqHeader) + 9

// AddSeq is a [Measure] of headers for a mandatory publish through
// transport/amqp, which adds SeqHeader to them (or replaces the caller's):
// the table grows by its entry, and is there even when headers are empty.
func AddSeq[T ~map[string]any](size int, headers T) (int, error) {
	if _, ok := headers[SeqHeader]; ok {
		return size, nil
	}
	if len(headers) == 0 {
		size += 4 // the table's length
	}
	if len(headers)+1 > MaxEntries {
		return 0, &transport.LimitError{Field: "header-entries", Size: len(headers) + 1, Limit: MaxEntries}
	}
	return size + seqEntry, nil
}
