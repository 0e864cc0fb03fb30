package amqplimit

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/transport"
)

// nest wraps leaf in depth tables (or arrays), one inside the other: the
// value of a header at level depth.
func nest(depth int, arrays bool, leaf any) any {
	v := leaf
	for range depth {
		if arrays {
			v = []any{v}
		} else {
			v = map[string]any{"n": v}
		}
	}
	return v
}

// wide is a table of n entries.
func wide(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[strconv.Itoa(i)] = nil
	}
	return m
}

func TestCheck(t *testing.T) {
	t.Parallel()
	s := strings.Repeat
	tests := []struct {
		name    string
		props   transport.Properties
		headers map[string]any
		want    *transport.LimitError // nil: passes
	}{
		{"empty", transport.Properties{}, nil, nil},
		{"message-id 255", transport.Properties{MessageID: s("m", 255)}, nil, nil},
		{"message-id 256", transport.Properties{MessageID: s("m", 256)}, nil, &transport.LimitError{Field: "message-id", Size: 256, Limit: 255}},
		{"content-type 256", transport.Properties{ContentType: s("c", 256)}, nil, &transport.LimitError{Field: "content-type", Size: 256, Limit: 255}},
		{"content-encoding 256", transport.Properties{ContentEncoding: s("c", 256)}, nil, &transport.LimitError{Field: "content-encoding", Size: 256, Limit: 255}},
		{"correlation-id 300", transport.Properties{CorrelationID: s("c", 300)}, nil, &transport.LimitError{Field: "correlation-id", Size: 300, Limit: 255}},
		{"reply-to 256", transport.Properties{ReplyTo: s("r", 256)}, nil, &transport.LimitError{Field: "reply-to", Size: 256, Limit: 255}},
		{"expiration 256", transport.Properties{Expiration: s("1", 256)}, nil, &transport.LimitError{Field: "expiration", Size: 256, Limit: 255}},
		{"type 256", transport.Properties{Type: s("t", 256)}, nil, &transport.LimitError{Field: "type", Size: 256, Limit: 255}},
		{"user-id 256", transport.Properties{UserID: s("u", 256)}, nil, &transport.LimitError{Field: "user-id", Size: 256, Limit: 255}},
		{"app-id 256", transport.Properties{AppID: s("a", 256)}, nil, &transport.LimitError{Field: "app-id", Size: 256, Limit: 255}},
		{"multi-byte runes count as bytes", transport.Properties{MessageID: s("é", 128)}, nil, &transport.LimitError{Field: "message-id", Size: 256, Limit: 255}},

		{"header name 255", transport.Properties{}, map[string]any{s("k", 255): 1}, nil},
		{"header name 256", transport.Properties{}, map[string]any{s("k", 256): 1}, &transport.LimitError{Field: s("k", 256), Size: 256, Limit: 255}},
		{"nested name 256", transport.Properties{}, map[string]any{"outer": map[string]any{s("k", 256): 1}}, &transport.LimitError{Field: "outer", Size: 256, Limit: 255}},
		{"name 256 in a table in an array", transport.Properties{}, map[string]any{"arr": []any{1, map[string]any{s("k", 256): 1}}}, &transport.LimitError{Field: "arr", Size: 256, Limit: 255}},
		{"long string values are long strings", transport.Properties{}, map[string]any{"v": s("v", 70000)}, nil},

		{"tables 32 deep", transport.Properties{}, map[string]any{"d": nest(32, false, 1)}, nil},
		{"tables 33 deep", transport.Properties{}, map[string]any{"d": nest(33, false, 1)}, &transport.LimitError{Field: "header-depth", Size: 33, Limit: 32}},
		{"an empty table at 33", transport.Properties{}, map[string]any{"d": nest(32, false, map[string]any{})}, &transport.LimitError{Field: "header-depth", Size: 33, Limit: 32}},
		{"arrays 32 deep", transport.Properties{}, map[string]any{"d": nest(32, true, 1)}, nil},
		{"arrays 33 deep", transport.Properties{}, map[string]any{"d": nest(33, true, 1)}, &transport.LimitError{Field: "header-depth", Size: 33, Limit: 32}},
		{"strings at 33", transport.Properties{}, map[string]any{"d": nest(32, true, []string{"s"})}, &transport.LimitError{Field: "header-depth", Size: 33, Limit: 32}},
		{"mixed 33 deep", transport.Properties{}, map[string]any{"d": nest(16, true, nest(17, false, 1))}, &transport.LimitError{Field: "header-depth", Size: 33, Limit: 32}},

		{"8192 headers", transport.Properties{}, wide(8192), nil},
		{"8193 headers", transport.Properties{}, wide(8193), &transport.LimitError{Field: "header-entries", Size: 8193, Limit: 8192}},
		{"a nested table of 8193", transport.Properties{}, map[string]any{"t": wide(8193)}, &transport.LimitError{Field: "header-entries", Size: 8193, Limit: 8192}},
		{"an array of 8192", transport.Properties{}, map[string]any{"a": make([]any, 8192)}, nil},
		{"an array of 8193", transport.Properties{}, map[string]any{"a": make([]any, 8193)}, &transport.LimitError{Field: "header-entries", Size: 8193, Limit: 8192}},
		{"strings 8193", transport.Properties{}, map[string]any{"a": make([]string, 8193)}, &transport.LimitError{Field: "header-entries", Size: 8193, Limit: 8192}},
		// The reader counts each container alone.
		{"two tables of 8000", transport.Properties{}, map[string]any{"a": wide(8000), "b": wide(8000)}, nil},

		{"headers over the frame", transport.Properties{}, map[string]any{"big": s("b", DefaultFrameMax)}, &transport.LimitError{Field: "headers", Size: 14 + 4 + 1 + 3 + 5 + DefaultFrameMax, Limit: DefaultFrameMax - 8 - DeathMargin}},
		{"properties count against the frame", transport.Properties{MessageID: s("m", 255)}, map[string]any{"big": s("b", HeaderLimit(DefaultFrameMax)-14-4-1-3-5)}, &transport.LimitError{Field: "headers", Size: HeaderLimit(DefaultFrameMax) + 256, Limit: HeaderLimit(DefaultFrameMax)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Check(&tt.props, tt.headers, DefaultFrameMax, nil)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check: %v, want nil", err)
				}
				return
			}
			var le *transport.LimitError
			if !errors.As(err, &le) {
				t.Fatalf("Check: %v, want %v", err, tt.want)
			}
			if *le != *tt.want {
				t.Errorf("Check: %+v, want %+v", *le, *tt.want)
			}
			if !errors.Is(err, transport.ErrTooLarge) {
				t.Errorf("Check: %v is not ErrTooLarge", err)
			}
		})
	}
}

// TestSizes: each type is sized as the transports send it.
func TestSizes(t *testing.T) {
	t.Parallel()
	stamp := time.Unix(1700000000, 0)
	tests := []struct {
		v    any
		want int // with the type octet
	}{
		{nil, 1}, {true, 2}, {int8(1), 2}, {int16(1), 3}, {uint8(1), 3}, // uint8 goes as int16
		{int32(1), 5}, {uint16(1), 5}, {float32(1), 5}, {1, 5}, {-1 << 31, 5},
		{1 << 31, 9}, {int64(1), 9}, {uint32(1), 9}, {uint(1), 9}, {uint64(1), 9}, {1.5, 9}, {stamp, 9},
		{"", 5}, {"abc", 8}, {[]byte("ab"), 7},
		{map[string]any{}, 5}, {amqp.Table{"ab": int32(1)}, 5 + 3 + 5},
		{[]any{}, 5}, {[]any{"a", nil}, 5 + 6 + 1}, {[]string{"a", "bc"}, 5 + 6 + 7},
	}
	for _, tt := range tests {
		got, err := Measure(&transport.Properties{}, amqp.Table{"k": tt.v}, nil)
		if err != nil {
			t.Errorf("%T %v: %v", tt.v, tt.v, err)
			continue
		}
		if got -= headerFixed + 4 + 2; got != tt.want {
			t.Errorf("%T %v: %d bytes, want %d", tt.v, tt.v, got, tt.want)
		}
	}
	p := transport.Properties{ContentType: "a", DeliveryMode: 2, Priority: 1, Timestamp: stamp}
	if got, _ := Measure(&p, map[string]any(nil), nil); got != headerFixed+2+1+1+8 {
		t.Errorf("properties: %d bytes, want %d", got, headerFixed+2+1+1+8)
	}
}

func TestUnknownType(t *testing.T) {
	t.Parallel()
	type odd struct{}
	err := Check(&transport.Properties{}, map[string]any{"o": odd{}}, 0, nil)
	if err == nil || errors.Is(err, transport.ErrTooLarge) {
		t.Errorf("Check of an odd type: %v, want an error that is not ErrTooLarge", err)
	}
	leaf := func(v any) (int, bool) { _, ok := v.(odd); return 7, ok }
	if n, err := Measure(&transport.Properties{}, map[string]any{"o": odd{}}, leaf); err != nil || n != headerFixed+4+2+7 {
		t.Errorf("Measure with a leaf: %d, %v; want %d", n, err, headerFixed+4+2+7)
	}
}

func TestFit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		size, frameMax int
		ok             bool
	}{
		{HeaderLimit(DefaultFrameMax), DefaultFrameMax, true},
		{HeaderLimit(DefaultFrameMax) + 1, DefaultFrameMax, false},
		{4096 - 8 - DeathMargin, 4096, true},
		{4096 - 8 - DeathMargin + 1, 4096, false},
		{1 << 30, 0, true}, // no frame limit negotiated
	} {
		if err := Fit(tt.size, tt.frameMax); (err == nil) != tt.ok {
			t.Errorf("Fit(%d, %d) = %v, want ok %v", tt.size, tt.frameMax, err, tt.ok)
		}
	}
}

func TestAddSeq(t *testing.T) {
	t.Parallel()
	p := &transport.Properties{}
	for _, h := range []map[string]any{nil, {"a": "b"}} {
		with := make(amqp.Table, len(h)+1)
		for k, v := range h {
			with[k] = v
		}
		with[SeqHeader] = int64(7)
		want, _ := Measure(p, with, nil)
		size, _ := Measure(p, h, nil)
		if got, err := AddSeq(size, h); err != nil || got != want {
			t.Errorf("AddSeq(%v) = %d, %v; want %d as measured with the header", h, got, err, want)
		}
	}
	if got, _ := AddSeq(100, map[string]any{SeqHeader: int64(1)}); got != 100 {
		t.Errorf("AddSeq with the header there: %d, want it unchanged", got)
	}
	var le *transport.LimitError
	if _, err := AddSeq(0, wide(MaxEntries)); !errors.As(err, &le) || le.Field != "header-entries" || le.Size != MaxEntries+1 {
		t.Errorf("AddSeq to %d headers: %v, want header-entries %d", MaxEntries, err, MaxEntries+1)
	}
}

// typical is a message as the server publishes it: the x-acemq headers, a
// trace context and the properties the Publisher sets.
func typical() (*transport.Properties, map[string]any) {
	return &transport.Properties{
			ContentType: "application/json", DeliveryMode: 2, MessageID: "01HZX3Q9J6Y8K2W4M5N7P0R1S3",
			CorrelationID: "req-42", Timestamp: time.Unix(1700000000, 0),
		}, map[string]any{
			"x-acemq-id":          "01HZX3Q9J6Y8K2W4M5N7P0R1S3",
			"x-acemq-attempt":     int64(2),
			"x-acemq-created":     int64(1700000000123),
			"x-acemq-exchange":    "orders",
			"x-acemq-routing-key": "order.placed",
			"x-acemq-error":       "handler: timeout",
			"traceparent":         "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			"tags":                []any{"a", "b"},
			SeqHeader:             int64(12345),
		}
}

// TestCheckAllocatesNothing: the check runs on every publish.
func TestCheckAllocatesNothing(t *testing.T) {
	props, headers := typical()
	if n := testing.AllocsPerRun(100, func() {
		if err := Check(props, headers, DefaultFrameMax, nil); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Check allocates %v times per message, want 0", n)
	}
}

// BenchmarkCheck: what the check adds to a publish.
//
//	go test -run '^$' -bench Check -benchmem ./internal/amqplimit
func BenchmarkCheck(b *testing.B) {
	props, headers := typical()
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(props, headers, DefaultFrameMax, nil); err != nil {
			b.Fatal(err)
		}
	}
}
