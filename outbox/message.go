package outbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/acemq/acemq"
)

// Message is what a service owes the broker once its transaction commits.
type Message struct {
	// Exchange and RoutingKey say where the message goes. Exchange "" is
	// the default exchange, where RoutingKey names a queue and may not be
	// empty.
	Exchange   string
	RoutingKey string
	// Queue is a shortcut for the default exchange with RoutingKey Queue;
	// set it or Exchange and RoutingKey, not both.
	Queue string
	Body  []byte
	// Headers are stored as JSON (jsonb) and published as AMQP headers in
	// the types JSON gives back: string, bool, int64 for a number without
	// a fraction that fits, float64 for any other, nil for null,
	// map[string]any and []any. []byte is published as its base64 text and
	// time.Time as RFC 3339 text; a value JSON cannot encode (NaN, a
	// channel) is an error from Write. The x-acemq-* headers are the
	// relay's to set.
	Headers       map[string]any
	ContentType   string
	CorrelationID string
	// ID becomes x-acemq-id and the AMQP message-id; empty gets a random
	// UUID. Every publish of the row, duplicates included, carries it.
	ID string
}

// maxShortStr is AMQP's limit on names and short properties.
const maxShortStr = 255

// maxHeaders bounds the encoded headers: AMQP sends them in one content
// header frame, which must fit the connection's frame_max (128 KiB by
// default); beyond it the broker closes the connection.
const maxHeaders = 64 << 10

// validate checks m and returns where it goes and its encoded headers.
func (m *Message) validate(maxBody int) (exchange, key string, headers []byte, err error) {
	exchange, key = m.Exchange, m.RoutingKey
	switch {
	case m.Queue != "" && m.Exchange != "":
		return "", "", nil, fmt.Errorf("%w: both Queue %q and Exchange %q are set; Queue means the default exchange", ErrInvalidMessage, m.Queue, m.Exchange)
	case m.Queue != "" && m.RoutingKey != "":
		return "", "", nil, fmt.Errorf("%w: both Queue %q and RoutingKey %q are set; Queue is the routing key", ErrInvalidMessage, m.Queue, m.RoutingKey)
	case m.Queue != "":
		key = m.Queue
	case m.Exchange == "" && m.RoutingKey == "":
		return "", "", nil, fmt.Errorf("%w: no Queue, Exchange or RoutingKey: the default exchange needs a queue name", ErrInvalidMessage)
	}
	for _, f := range [...]struct{ name, v string }{
		{"Exchange", exchange}, {"RoutingKey", key}, {"ID", m.ID},
		{"ContentType", m.ContentType}, {"CorrelationID", m.CorrelationID},
	} {
		if err := shortStr(f.name, f.v); err != nil {
			return "", "", nil, err
		}
	}
	if len(m.Body) > maxBody {
		return "", "", nil, fmt.Errorf("%w: the body is %d bytes, more than the %d this outbox accepts", ErrTooLarge, len(m.Body), maxBody)
	}
	headers, err = encodeHeaders(m.Headers)
	return exchange, key, headers, err
}

// shortStr checks a value bound for an AMQP short string and a text column.
func shortStr(field, v string) error {
	switch {
	case len(v) > maxShortStr:
		return fmt.Errorf("%w: %s is %d bytes; AMQP allows at most %d", ErrInvalidMessage, field, len(v), maxShortStr)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidMessage, field, v)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s %q contains a NUL byte", ErrInvalidMessage, field, v)
	}
	return nil
}

// reserved are the headers the relay stamps on every message.
var reserved = [...]string{acemq.HeaderID, acemq.HeaderAttempt, acemq.HeaderCreated, acemq.HeaderExchange, acemq.HeaderRoutingKey}

// encodeHeaders returns h as JSON, or nil for none.
func encodeHeaders(h map[string]any) ([]byte, error) {
	if len(h) == 0 {
		return nil, nil
	}
	for k := range h {
		for _, r := range reserved {
			if k == r {
				return nil, fmt.Errorf("%w: header %s is set by the relay", ErrInvalidMessage, k)
			}
		}
		if err := shortStr("header name", k); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("%w: headers cannot be stored as JSON: %w", ErrInvalidMessage, err)
	}
	if hasNUL(b) {
		return nil, fmt.Errorf("%w: a header contains a NUL character, which jsonb cannot store", ErrInvalidMessage)
	}
	if len(b) > maxHeaders {
		return nil, fmt.Errorf("%w: headers take %d bytes as JSON; at most %d fit in an AMQP frame", ErrTooLarge, len(b), maxHeaders)
	}
	return b, nil
}

// hasNUL reports whether JSON text holds an escaped NUL character (\u0000
// after an even number of backslashes), which jsonb refuses.
func hasNUL(b []byte) bool {
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		j += i
		n := 0
		for k := j - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = j + 1
	}
}

// decodeHeaders reads the headers column back, numbers as int64 when
// they are whole and fit, float64 otherwise. SQL NULL and JSON null are no
// headers. Headers no message can carry, which another writer may have
// stored, are an error that says why: not JSON, JSON that is not an
// object, a number no AMQP type holds, a name longer than AMQP allows. The
// rest of what AMQP cannot carry (nesting, width, the frame) is the
// transport's to refuse, as it measures the publish.
func decodeHeaders(b []byte) (map[string]any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	if err == nil {
		if _, end := d.Token(); end != io.EOF {
			err = errors.New("more than one JSON value")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the headers column cannot be read as JSON: %w", ErrInvalidMessage, err)
	}
	var h map[string]any
	switch v := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		h = v
	case []any:
		return nil, notObject("array")
	case string:
		return nil, notObject("string")
	case json.Number:
		return nil, notObject("number")
	case bool:
		return nil, notObject("boolean")
	}
	for k, e := range h {
		if len(k) > maxShortStr {
			return nil, fmt.Errorf("%w: a header name is %d bytes; AMQP allows at most %d", ErrInvalidMessage, len(k), maxShortStr)
		}
		n, err := numbers(e)
		if err != nil {
			return nil, fmt.Errorf("%w: header %q: %w", ErrInvalidMessage, k, err)
		}
		h[k] = n
	}
	return h, nil
}

func notObject(kind string) error {
	return fmt.Errorf("%w: the headers column holds a JSON %s, not an object", ErrInvalidMessage, kind)
}

// numbers gives the numbers in v their Go types, and checks the names of
// the tables in it.
func numbers(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			s := v.String()
			if len(s) > 24 {
				s = fmt.Sprintf("%s... (%d digits)", s[:20], len(s))
			}
			return nil, fmt.Errorf("the number %s is beyond what a float64, the widest AMQP number, holds", s)
		}
		return f, nil
	case map[string]any:
		for k, e := range v {
			if len(k) > maxShortStr {
				return nil, fmt.Errorf("a name in it is %d bytes; AMQP allows at most %d", len(k), maxShortStr)
			}
			n, err := numbers(e)
			if err != nil {
				return nil, err
			}
			v[k] = n
		}
	case []any:
		for i, e := range v {
			n, err := numbers(e)
			if err != nil {
				return nil, err
			}
			v[i] = n
		}
	}
	return v, nil
}

// Errors for callers to branch on with errors.Is.
var (
	// ErrInvalidTable is returned, wrapped, by New for a table name that
	// WithTable does not allow.
	ErrInvalidTable = errors.New("acemq: invalid outbox table name")
	// ErrInvalidMessage is returned, wrapped, by Write for a message that
	// could never be published as given: a malformed routing target, a
	// name AMQP cannot carry, headers JSON cannot store. A relay wraps it
	// in the last error of a row that no Write made and that cannot be
	// published as it stands (see "Rows another writer made" in the
	// package documentation).
	ErrInvalidMessage = errors.New("acemq: invalid outbox message")
	// ErrTooLarge is returned, wrapped, by Write for a body larger than
	// WithMaxBodySize allows, or headers too large for an AMQP frame; a
	// relay records it, in the same words, on such a row that another
	// writer made.
	ErrTooLarge = errors.New("acemq: outbox message too large")
)
