package rabbitmq

import (
	"fmt"
	"math"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/fieldvalue"
)

// seqHeader carries the id that correlates a basic.return with its publish
// when the message's x-acemq-id cannot (confirmCh): amqp091-go gives
// returns no delivery tag, and the message's own MessageID and headers
// belong to the user. It is stripped from every delivery.
const seqHeader = "x-acemq-publish-seq"

// idHeader is the wire contract's message id (internal/wire.ID), by which
// a basic.return is matched to its publish when no other publish in flight
// on the channel has the same.
const idHeader = "x-acemq-id"

// sendTable is headers as amqp091-go is to send them: the caller's map
// itself when every value is one amqp091-go writes as it is (own false:
// it must not be written to), else a converted copy (toTable), which the
// caller owns.
func sendTable(headers map[string]any) (t amqp.Table, own bool, err error) {
	for _, v := range headers {
		if !sentAsIs(v) {
			t, err := toTable(headers)
			return t, true, err
		}
	}
	return amqp.Table(headers), false, nil
}

// sentAsIs reports whether toField would hand v back unchanged: a value
// that is neither a container nor an integer it widens.
func sentAsIs(v any) bool {
	switch v.(type) {
	case nil, bool, int8, int16, int32, int64, float32, float64, string, []byte, time.Time, amqp.Decimal:
		return true
	}
	return false
}

// toTable converts headers or queue arguments to an AMQP field table,
// recursively: nested maps become tables and slices become arrays. Integers
// are sent at their full width (amqp091-go writes a plain int as 32 bits,
// which would truncate a millisecond timestamp). Unsupported types are an
// error, before anything is sent.
func toTable(m map[string]any) (amqp.Table, error) {
	if m == nil {
		return nil, nil
	}
	t := make(amqp.Table, len(m))
	for k, v := range m {
		fv, err := toField(v)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		t[k] = fv
	}
	return t, nil
}

func toField(v any) (any, error) {
	switch v := v.(type) {
	case nil, bool, int8, int16, int32, int64, float32, float64, string, []byte, time.Time, amqp.Decimal:
		return v, nil
	case map[string]any:
		return toTable(v)
	case amqp.Table:
		return toTable(v)
	case []any:
		return fieldvalue.Array(v, toField)
	case []string:
		return fieldvalue.Strings(v), nil
	default:
		if n, ok, err := fieldvalue.Integer(v); ok {
			return n, err
		}
		return nil, fmt.Errorf("unsupported header type %T", v)
	}
}

// fromTable converts a received field table to the header types the
// transport package documents: nested tables become map[string]any, arrays
// []any, unsigned integers the next wider signed type and decimals float64.
// The internal publish-sequence header is dropped. A nil or empty table is
// nil.
func fromTable(t amqp.Table) map[string]any {
	if len(t) == 0 {
		return nil
	}
	m := make(map[string]any, len(t))
	for k, v := range t {
		if k == seqHeader {
			continue
		}
		m[k] = fromField(v)
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func fromField(v any) any {
	switch v := v.(type) {
	case amqp.Table:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = fromField(e)
		}
		return m
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = fromField(e)
		}
		return out
	case uint8:
		return int16(v)
	case uint16:
		return int32(v)
	case uint32:
		return int64(v)
	case amqp.Decimal:
		return float64(v.Value) / math.Pow10(int(v.Scale))
	case time.Time:
		return v.UTC()
	default:
		return v
	}
}
