package memory

import (
	"fmt"
	"time"

	"github.com/acemq/acemq/internal/fieldvalue"
	"github.com/acemq/acemq/transport"
)

// normalizeTable validates headers (or queue arguments) and returns a deep
// copy holding the types a consumer receives from RabbitMQ through the amqp
// transport: int becomes int32 when it fits and int64 otherwise, unsigned
// integers the next wider signed type, []string an array, times whole UTC
// seconds (an AMQP timestamp has no fraction). A type AMQP cannot carry is
// an error, as amqp091-go refuses it before anything is sent. An empty
// table is nil, as it arrives from the broker.
func normalizeTable(m map[string]any) (map[string]any, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		nv, err := normalizeValue(v)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		out[k] = nv
	}
	return out, nil
}

func normalizeValue(v any) (any, error) {
	switch v := v.(type) {
	case nil, bool, int8, int16, int32, int64, float32, float64, string:
		return v, nil
	case []byte:
		return append([]byte{}, v...), nil
	case time.Time:
		return wholeSeconds(v), nil
	case map[string]any:
		t, err := normalizeTable(v)
		if t == nil && err == nil {
			t = map[string]any{}
		}
		return t, err
	case []any:
		return fieldvalue.Array(v, normalizeValue)
	case []string:
		return fieldvalue.Strings(v), nil
	default:
		if n, ok, err := fieldvalue.Integer(v); ok {
			return n, err
		}
		return nil, fmt.Errorf("unsupported header type %T", v)
	}
}

// wholeSeconds is t as an AMQP timestamp carries it.
func wholeSeconds(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Unix(t.Unix(), 0).UTC()
}

// copyTable deep-copies a normalized table, so that a consumer changing
// what it received cannot change the stored message.
func copyTable(m map[string]any, extra int) map[string]any {
	if m == nil && extra == 0 {
		return nil
	}
	out := make(map[string]any, len(m)+extra)
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return copyTable(v, 0)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyValue(e)
		}
		return out
	case []byte:
		return append([]byte{}, v...)
	default:
		return v
	}
}

// toInt64 reads any integer header or argument value.
func toInt64(v any) (int64, bool) { return transport.Int64(v) }

// field is one stored header. A stored message keeps its headers as a
// slice, cheaper to build than a map; each delivery gets a map of its own.
type field struct {
	key   string
	value any
}

type fields []field

// storeHeaders normalizes a publish's headers for storage and applies
// sender-selected distribution: the CC and BCC arrays add routing keys
// (returned, with key first, when there are any) and BCC is removed. The
// headers are appended to room, which may be nil.
func storeHeaders(m map[string]any, key string, room fields) (fields, []string, error) {
	if len(m) == 0 {
		return nil, nil, nil
	}
	out := room
	if cap(out) < len(m) {
		out = make(fields, 0, len(m))
	}
	var cc, bcc any
	for k, v := range m {
		nv, err := normalizeValue(v)
		if err != nil {
			return nil, nil, fmt.Errorf("field %q: %w", k, err)
		}
		switch k {
		case "CC":
			cc = nv
		case "BCC":
			bcc = nv
			continue
		}
		out = append(out, field{k, nv})
	}
	if cc == nil && bcc == nil {
		return out, nil, nil
	}
	keys := []string{key}
	for _, h := range [...]struct {
		name string
		v    any
	}{{"CC", cc}, {"BCC", bcc}} {
		if h.v == nil {
			continue
		}
		arr, ok := h.v.([]any)
		if !ok {
			return nil, nil, fmt.Errorf("%w: unacceptable type %T in header '%s'", transport.ErrPreconditionFailed, h.v, h.name)
		}
		for _, k := range arr {
			if s, ok := k.(string); ok {
				keys = append(keys, s)
			}
		}
	}
	return out, keys, nil
}

// toMap deep-copies the headers into a map with room for extra more.
func (fs fields) toMap(extra int) map[string]any {
	if len(fs) == 0 && extra == 0 {
		return nil
	}
	out := make(map[string]any, len(fs)+extra)
	for _, f := range fs {
		out[f.key] = copyValue(f.value)
	}
	return out
}

// shallowMap returns the headers as a map sharing their values.
func (fs fields) shallowMap(extra int) map[string]any {
	out := make(map[string]any, len(fs)+extra)
	for _, f := range fs {
		out[f.key] = f.value
	}
	return out
}

func fieldsOf(m map[string]any) fields {
	out := make(fields, 0, len(m))
	for k, v := range m {
		out = append(out, field{k, v})
	}
	return out
}
