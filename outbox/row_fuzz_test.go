package outbox

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// FuzzRelayRow feeds the relay's row-to-publishing step what a row can
// hold, whoever wrote it: headers as any bytes, JSON or not, and any
// strings in the text columns. It must never panic, and must give either
// a publishing true to the row, or a row error that the last_error column
// can store. The publishing then goes through the memory transport, which
// refuses what AMQP cannot carry as the amqp transport does: neither may
// panic.
func FuzzRelayRow(f *testing.F) {
	deep := strings.Repeat("[", 40) + strings.Repeat("]", 40)
	for _, h := range []string{
		"", "null", " null ", "{}", `{"tenant":"acme","n":42,"f":0.5,"ok":true,"nil":null,"l":[1,"two",{"k":"v"}]}`,
		"[1,2]", `"x"`, "42", "true", "not json", "{} {}", "{", `{"a":1}]`,
		`{"n": 1e400}`, `{"m": {"k": [1, -1e400]}}`, `{"tiny": 1e-400}`, `{"big": 123456789012345678901234567890}`,
		`{"deep": ` + deep + `}`, `{"deep": ` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
		`{"` + strings.Repeat("k", 300) + `": 1}`, `{"t": {"` + strings.Repeat("k", 256) + `": 1}}`,
		`{"x-acemq-id": "spoof", "x-acemq-attempt": 9, "x-acemq-error": "stale"}`, `{"CC": "audit"}`, `{"BCC": ["q"]}`,
		"{\"\xff\": \"\xfe\"}", `{"nul": "\u0000"}`, `{"s": "\ud800"}`, "\x01\x7b\x7d",
	} {
		f.Add([]byte(h), "", "orders", "application/json", "c-1", "id-1")
	}
	f.Add([]byte(nil), strings.Repeat("e", 256), "k", "", "", "id")
	f.Add([]byte(nil), "x", strings.Repeat("k", 300), strings.Repeat("c", 256), "", "id")
	f.Add([]byte(nil), "x\x00", "\xff", "a\x00", "\xfe", "")
	f.Add([]byte(`{}`), "", "", "", strings.Repeat("c", 256), strings.Repeat("i", 300))

	mem := memory.New()
	f.Cleanup(func() { _ = mem.Close() })
	conn := mem.Connect()
	f.Cleanup(func() { _ = conn.Close() })
	if err := conn.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: "orders"}}}); err != nil {
		f.Fatal(err)
	}
	created := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)

	f.Fuzz(func(t *testing.T, headers []byte, exchange, key, contentType, correlationID, id string) {
		x := row{seq: 1, id: id, exchange: exchange, key: key, headers: headers, contentType: contentType,
			correlationID: correlationID, body: []byte("b"), size: 1, created: created}
		pub, err := publishing(&x)
		if err != nil {
			if !errors.Is(err, ErrInvalidMessage) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("row error %v is neither ErrInvalidMessage nor ErrTooLarge", err)
			}
			stored(t, err)
			return
		}
		if pub.Exchange != exchange || pub.RoutingKey != key || pub.ContentType != contentType || pub.CorrelationID != correlationID ||
			!pub.Mandatory || pub.DeliveryMode != 2 || string(pub.Body) != "b" {
			t.Fatalf("publishing %+v of row %+v", pub, x)
		}
		if pub.Headers[wire.ID] != id || pub.Headers[wire.Attempt] != int64(1) || pub.Headers[wire.Created] != created.UnixMilli() {
			t.Fatalf("contract headers %v for id %q", pub.Headers, id)
		}
		if _, ok := pub.Headers[wire.Error]; ok {
			t.Fatalf("a new message carries %s", wire.Error)
		}
		for k, v := range pub.Headers {
			if err := amqpTyped(v); err != nil {
				t.Fatalf("header %q: %v", k, err)
			}
		}
		if _, err := conn.Publish(context.Background(), pub); err != nil {
			stored(t, err) // the transport's refusal is the row's error too
		}
	})
}

// stored checks that err, as the relay records it, is something the
// last_error column holds.
func stored(t *testing.T, err error) {
	t.Helper()
	s := lastError(err)
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 || len(s) > maxLastError || s == "" {
		t.Fatalf("last_error %q (%d bytes) from %v", s, len(s), err)
	}
}

// amqpTyped checks that v holds only the types the relay promises for
// headers read back from JSON, with finite numbers.
func amqpTyped(v any) error {
	switch v := v.(type) {
	case nil, bool, int64, string:
		return nil
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return errors.New("a number that is not finite")
		}
		return nil
	case map[string]any:
		for k, e := range v {
			if len(k) > maxShortStr {
				return errors.New("a name over 255 bytes")
			}
			if err := amqpTyped(e); err != nil {
				return err
			}
		}
		return nil
	case []any:
		for _, e := range v {
			if err := amqpTyped(e); err != nil {
				return err
			}
		}
		return nil
	}
	return errors.New("a value of an unexpected type")
}

func TestLastError(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", maxLastError)
	for _, tt := range []struct {
		in, want string
	}{
		{"plain", "plain"},
		{"nul\x00byte", `nul\x00byte`},
		{"bad \xff utf-8", "bad ? utf-8"},
		{long, long[:maxLastError-4] + "..."},
	} {
		if got := lastError(errors.New(tt.in)); got != tt.want {
			t.Errorf("lastError(%.20q) = %.40q (%d bytes), want %.40q", tt.in, got, len(got), tt.want)
		}
	}
}
