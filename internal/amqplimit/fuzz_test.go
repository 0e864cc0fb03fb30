package amqplimit

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/fieldvalue"
	"github.com/acemq/acemq/transport"
)

// decimalLeaf sizes amqp.Decimal, as transport/amqp does.
func decimalLeaf(v any) (int, bool) {
	_, ok := v.(amqp.Decimal)
	return 6, ok
}

// convert is headers as transport/amqp hands them to amqp091-go: nested
// tables as amqp.Table, arrays as []any, integers as internal/fieldvalue
// maps them.
func convert(v any) any {
	switch v := v.(type) {
	case map[string]any:
		t := make(amqp.Table, len(v))
		for k, e := range v {
			t[k] = convert(e)
		}
		return t
	case []any:
		out, _ := fieldvalue.Array(v, func(e any) (any, error) { return convert(e), nil })
		return out
	case []string:
		return fieldvalue.Strings(v)
	}
	if n, ok, err := fieldvalue.Integer(v); ok && err == nil {
		return n
	}
	return v
}

// verify holds Check to amqp091-go on one publish: headers of the types
// transport.Publishing documents measure as their conversion does; what
// Check accepts amqp091-go writes in exactly the bytes measured and reads
// back whole; what it refuses as a short string or name too long,
// amqp091-go's writer refuses; what it refuses as too deep or too wide,
// amqp091-go's reader refuses; and a header it refuses as too large is
// sized exactly, and unreadable when it passes the frame, not only the
// margin.
func verify(t *testing.T, props *transport.Properties, raw map[string]any, frameMax int) {
	t.Helper()
	conv, _ := convert(raw).(amqp.Table)
	if raw == nil {
		conv = nil
	}
	rawSize, rawErr := Measure(props, raw, decimalLeaf)
	size, err := Measure(props, conv, decimalLeaf)
	if rawSize != size || (rawErr == nil) != (err == nil) {
		t.Fatalf("Measure: %d, %v as given, %d, %v converted", rawSize, rawErr, size, err)
	}
	if err == nil {
		err = Fit(size, frameMax)
	}
	var le *transport.LimitError
	if err != nil && !errors.As(err, &le) {
		t.Fatalf("Check: %v, not a LimitError", err)
	}

	conn, ch, b := dialFake(t, frameMax)
	if got := conn.Config.FrameSize; got != frameMax {
		t.Fatalf("negotiated frame size %d, want %d", got, frameMax)
	}
	msg := amqp.Publishing{
		Headers: conv, ContentType: props.ContentType, ContentEncoding: props.ContentEncoding,
		DeliveryMode: props.DeliveryMode, Priority: props.Priority, CorrelationId: props.CorrelationID,
		ReplyTo: props.ReplyTo, Expiration: props.Expiration, MessageId: props.MessageID,
		Timestamp: props.Timestamp, Type: props.Type, UserId: props.UserID, AppId: props.AppID,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	werr := ch.PublishWithContext(ctx, "", "q", false, false, msg)
	switch {
	case le != nil && le.Field != "headers" && le.Field != "header-depth" && le.Field != "header-entries":
		// A short string or name too long.
		if werr == nil {
			t.Fatalf("Check refused %v, amqp091-go wrote it", err)
		}
		return
	case werr != nil && le != nil && le.Field != "headers":
		return // too deep or wide, and a name too long besides
	case werr != nil:
		t.Fatalf("Check: %v; amqp091-go's writer: %v", err, werr)
	}
	if le == nil || le.Field == "headers" {
		if n := len(b.written(t)); n != size {
			t.Fatalf("measured %d bytes, amqp091-go wrote %d", size, n)
		}
	}
	d, ok, gerr := ch.Get("q", true)
	readable := gerr == nil && ok
	switch {
	case le == nil && !readable:
		t.Fatalf("Check accepted it, amqp091-go's reader: %v (ok %v)", gerr, ok)
	case le != nil && le.Field == "headers":
		if fits := size <= frameMax-FrameOverhead; readable != fits {
			t.Fatalf("a header of %d bytes on a frame of %d: read %v (%v)", size, frameMax, readable, gerr)
		}
	case le != nil && readable:
		t.Fatalf("Check refused %v, amqp091-go read it", err)
	}
	if le == nil {
		if !same(conv, d.Headers) {
			t.Fatalf("read back %#v, sent %#v", d.Headers, conv)
		}
		if d.MessageId != props.MessageID || d.CorrelationId != props.CorrelationID || d.AppId != props.AppID {
			t.Fatalf("read back properties %+v, sent %+v", d, props)
		}
	}
}

// same compares a table sent with the one read back, as amqp091-go reads
// it: timestamps in whole seconds, floats by their bits.
func same(sent, got any) bool {
	switch s := sent.(type) {
	case amqp.Table:
		g, ok := got.(amqp.Table)
		if !ok && got != nil || len(s) != len(g) { // no table read is nil
			return false
		}
		for k, v := range s {
			if gv, ok := g[k]; !ok || !same(v, gv) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(s) != len(g) {
			return false
		}
		for i := range s {
			if !same(s[i], g[i]) {
				return false
			}
		}
		return true
	case []byte:
		g, ok := got.([]byte)
		return ok && bytes.Equal(s, g)
	case time.Time:
		g, ok := got.(time.Time)
		return ok && g.Unix() == s.Unix()
	case float32:
		g, ok := got.(float32)
		return ok && math.Float32bits(s) == math.Float32bits(g)
	case float64:
		g, ok := got.(float64)
		return ok && math.Float64bits(s) == math.Float64bits(g)
	}
	return sent == got
}

// TestAgreesWithAmqp091 runs verify on the boundaries.
func TestAgreesWithAmqp091(t *testing.T) {
	t.Parallel()
	s := strings.Repeat
	stamp := time.Unix(1700000000, 0)
	props := &transport.Properties{ContentType: "text/plain", DeliveryMode: 2, Priority: 1, MessageID: "m", Timestamp: stamp}
	every := map[string]any{
		"nil": nil, "bool": true, "i8": int8(-1), "i16": int16(-2), "i32": int32(-3), "i64": int64(-4),
		"int": 5, "bigint": 1 << 40, "u8": uint8(6), "u16": uint16(7), "u32": uint32(8), "u": uint(9), "u64": uint64(10),
		"f32": float32(1.5), "f64": 2.5, "s": "str", "b": []byte("bytes"), "t": stamp,
		"table": map[string]any{"a": 1, "b": map[string]any{}}, "array": []any{1, "x", []any{}}, "strings": []string{"a", "b"},
		"decimal": amqp.Decimal{Scale: 2, Value: 314},
	}
	for _, tt := range []struct {
		name     string
		props    *transport.Properties
		headers  map[string]any
		frameMax int
	}{
		{"every type", props, every, DefaultFrameMax},
		{"no headers", props, nil, DefaultFrameMax},
		{"empty headers", props, map[string]any{}, DefaultFrameMax},
		{"message-id 255", &transport.Properties{MessageID: s("m", 255)}, nil, DefaultFrameMax},
		{"message-id 256", &transport.Properties{MessageID: s("m", 256)}, nil, DefaultFrameMax},
		{"app-id 256", &transport.Properties{AppID: s("a", 256)}, nil, DefaultFrameMax},
		{"name 255", props, map[string]any{s("k", 255): 1}, DefaultFrameMax},
		{"name 256", props, map[string]any{s("k", 256): 1}, DefaultFrameMax},
		{"nested name 256", props, map[string]any{"t": map[string]any{s("k", 256): 1}}, DefaultFrameMax},
		{"depth 32", props, map[string]any{"d": nest(32, false, 1)}, DefaultFrameMax},
		{"depth 33", props, map[string]any{"d": nest(33, false, 1)}, DefaultFrameMax},
		{"array depth 32", props, map[string]any{"d": nest(32, true, "x")}, DefaultFrameMax},
		{"array depth 33", props, map[string]any{"d": nest(33, true, "x")}, DefaultFrameMax},
		{"8192 headers", props, wide(8192), DefaultFrameMax},
		{"8193 headers", props, wide(8193), DefaultFrameMax},
		{"array of 8192", props, map[string]any{"a": make([]any, 8192)}, DefaultFrameMax},
		{"array of 8193", props, map[string]any{"a": make([]any, 8193)}, DefaultFrameMax},
		{"at the limit", &transport.Properties{}, map[string]any{"p": s("p", HeaderLimit(DefaultFrameMax)-headerFixed-4-2-5)}, DefaultFrameMax},
		{"in the margin", &transport.Properties{}, map[string]any{"p": s("p", HeaderLimit(DefaultFrameMax)-headerFixed-4-2-5+1)}, DefaultFrameMax},
		{"at the frame", &transport.Properties{}, map[string]any{"p": s("p", DefaultFrameMax-8-headerFixed-4-2-5)}, DefaultFrameMax},
		{"over the frame", &transport.Properties{}, map[string]any{"p": s("p", DefaultFrameMax-8-headerFixed-4-2-5+1)}, DefaultFrameMax},
		{"over a small frame", props, map[string]any{"p": s("p", 4096)}, 4096},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			verify(t, tt.props, tt.headers, tt.frameMax)
		})
	}
}

// gen builds a publish from fuzz bytes: properties and headers of every
// type, with lengths and counts that often land on the limits.
type gen struct {
	b       []byte
	budget  int // string bytes left, so that no input asks for gigabytes
	entries int // table and array entries left, likewise
}

func (g *gen) u8() byte {
	if len(g.b) == 0 {
		return 0
	}
	v := g.b[0]
	g.b = g.b[1:]
	return v
}

func (g *gen) u16() uint16 { return uint16(g.u8())<<8 | uint16(g.u8()) }
func (g *gen) u32() uint32 { return uint32(g.u16())<<16 | uint32(g.u16()) }
func (g *gen) u64() uint64 { return uint64(g.u32())<<32 | uint64(g.u32()) }

// length is short, or close to 255.
func (g *gen) length() int {
	if b := g.u8(); b < 240 {
		return int(b % 24)
	} else {
		return 250 + int(b-240)
	}
}

// count is small, or close to 8192.
func (g *gen) count() int {
	n := 0
	if b := g.u8(); b < 250 {
		n = int(b % 6)
	} else {
		n = MaxEntries - 2 + int(b-250)
	}
	n = min(n, g.entries)
	g.entries -= n
	return n
}

func (g *gen) str(n int) string {
	n = min(n, g.budget)
	g.budget -= n
	return strings.Repeat("s", n)
}

func (g *gen) publishing() (*transport.Properties, map[string]any, int) {
	p := &transport.Properties{}
	for _, f := range []*string{&p.ContentType, &p.ContentEncoding, &p.CorrelationID, &p.ReplyTo,
		&p.Expiration, &p.MessageID, &p.Type, &p.UserID, &p.AppID} {
		if b := g.u8(); b&1 == 1 {
			*f = g.str(g.length())
		}
	}
	p.DeliveryMode, p.Priority = g.u8()%3, g.u8()%3
	if g.u8()&1 == 1 {
		p.Timestamp = time.Unix(int64(g.u32()), 0)
	}
	frameMax := DefaultFrameMax
	if g.u8()&1 == 1 {
		frameMax = 4096
	}
	var h map[string]any
	if t, ok := g.value(0).(map[string]any); ok {
		h = t
	}
	return p, h, frameMax
}

func (g *gen) value(depth int) any {
	switch g.u8() % 22 {
	case 0:
		return nil
	case 1:
		return g.u8()&1 == 1
	case 2:
		return int8(g.u8())
	case 3:
		return int16(g.u16())
	case 4:
		return int32(g.u32())
	case 5:
		return int64(g.u64())
	case 6:
		return int(int64(g.u64()) >> (g.u8() % 64))
	case 7:
		return g.u8() // uint8
	case 8:
		return g.u16()
	case 9:
		return g.u32()
	case 10:
		return g.u64() >> 1 // what fits an int64
	case 11:
		return math.Float32frombits(g.u32())
	case 12:
		return math.Float64frombits(g.u64())
	case 13:
		return g.str(g.length())
	case 14:
		return g.str(int(g.u16()) * 2) // up to a frame
	case 15:
		return []byte(g.str(g.length()))
	case 16:
		return time.Unix(int64(g.u32()), 0)
	case 17:
		return amqp.Decimal{Scale: g.u8(), Value: int32(g.u32())}
	case 18, 19:
		n := g.count()
		t := make(map[string]any, n)
		for i := range n {
			t[strconv.Itoa(i)+strings.Repeat("k", g.length())] = g.value(depth + 1)
		}
		return t
	case 20:
		a := make([]any, g.count())
		for i := range a {
			a[i] = g.value(depth + 1)
		}
		return a
	default:
		a := make([]string, g.count())
		for i := range a {
			a[i] = g.str(g.length())
		}
		return a
	}
}

// seed is fuzz input that gen reads as headers of one nested header
// path: depth tables, each of one entry, around a leaf op.
func seed(depth int, leaf ...byte) []byte {
	b := make([]byte, 9+4) // no properties, no timestamp, the default frame
	b = append(b, 18, 1)   // the headers: a table of one entry
	for range depth {
		b = append(b, 0, 18, 1) // name "0", a table of one entry
	}
	return append(append(b, 0), leaf...)
}

// FuzzPublishLimits: on any publish, Check never panics and agrees with
// amqp091-go (see verify).
//
//	go test -run '^$' -fuzz FuzzPublishLimits -fuzztime 60s ./internal/amqplimit
func FuzzPublishLimits(f *testing.F) {
	f.Add([]byte{})
	f.Add(seed(31, 4, 0, 0, 0, 1))                      // 32 deep
	f.Add(seed(32, 4, 0, 0, 0, 1))                      // 33 deep
	f.Add(seed(0, 18, 251))                             // 8192 entries
	f.Add(seed(0, 18, 252))                             // 8193 entries
	f.Add(seed(0, 20, 252))                             // an array of 8193
	f.Add(append(seed(0), 14, 0xff, 0xff))              // a header over the frame
	f.Add(append(seed(0), 13, 245))                     // 255 bytes
	f.Add([]byte{0, 0, 0, 0, 0, 1, 246, 0, 0, 0, 0, 0}) // message-id 256
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{b: data, budget: 1 << 20, entries: 3 * MaxEntries}
		props, headers, frameMax := g.publishing()
		verify(t, props, headers, frameMax)
	})
}
