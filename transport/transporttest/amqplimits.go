package transporttest

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/acemq/acemq/transport"
)

// What AMQP and amqp091-go cannot carry is refused before anything is
// written, as a *transport.LimitError: a short string over 255 bytes
// would fail amqp091-go's writer after basic.publish and kill the
// connection, and a table amqp091-go's reader refuses would close every
// consumer's connection that met it. Each case checks that a refusal
// costs nothing else: the same connection publishes next, and a consumer
// subscribed throughout receives what was accepted.

// tooLarge publishes p and checks it was refused as a LimitError for
// field, with nothing routed.
func (e *env) tooLarge(c transport.Transport, p transport.Publishing, field string) {
	e.t.Helper()
	_, err := c.Publish(e.ctx(), p)
	var le *transport.LimitError
	if !errors.As(err, &le) || !errors.Is(err, transport.ErrTooLarge) {
		e.t.Fatalf("publish breaking the %.40s limit: error %v, want a *transport.LimitError", field, err)
	}
	if le.Field != field {
		e.t.Errorf("LimitError.Field %.40q, want %.40q", le.Field, field)
	}
	if le.Size <= le.Limit {
		e.t.Errorf("LimitError %d over %d", le.Size, le.Limit)
	}
}

// limitsSetup is a queue, a consumer on it, and a check that a message
// published after a refusal arrives.
func limitsSetup(e *env) (c transport.Transport, q string, sub transport.Subscription, after func()) {
	c = e.conn()
	q = e.queue(c, "q", nil)
	sub = e.consume(c, q, 10)
	after = func() {
		e.t.Helper()
		e.send(c, q, "after")
		e.ack(e.recvBody(sub, "after"))
	}
	return c, q, sub, after
}

// testMessageIDLimit: a message-id of 256 bytes is refused; one of 255
// passes and reads back whole.
func testMessageIDLimit(t *testing.T, e *env) {
	c, q, sub, after := limitsSetup(e)
	e.tooLarge(c, transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("long"),
		Properties: transport.Properties{MessageID: strings.Repeat("m", 256)}}, "message-id")
	after()

	id := strings.Repeat("é", 127) + "m" // 255 bytes, runes cut at no edge
	e.publish(c, transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("255"),
		Properties: transport.Properties{MessageID: id}})
	d := e.recvBody(sub, "255")
	if d.MessageID != id {
		t.Errorf("message-id read back as %d bytes, want the 255 sent", len(d.MessageID))
	}
	e.ack(d)
	e.none(sub)
}

// testShortStringProperties: every short-string property is held to 255
// bytes, by its AMQP name.
func testShortStringProperties(t *testing.T, e *env) {
	c, q, _, after := limitsSetup(e)
	long := strings.Repeat("p", 256)
	for field, set := range map[string]func(*transport.Properties){
		"content-type":     func(p *transport.Properties) { p.ContentType = long },
		"content-encoding": func(p *transport.Properties) { p.ContentEncoding = long },
		"correlation-id":   func(p *transport.Properties) { p.CorrelationID = long },
		"reply-to":         func(p *transport.Properties) { p.ReplyTo = long },
		"expiration":       func(p *transport.Properties) { p.Expiration = strings.Repeat("1", 256) },
		"type":             func(p *transport.Properties) { p.Type = long },
		"user-id":          func(p *transport.Properties) { p.UserID = long },
		"app-id":           func(p *transport.Properties) { p.AppID = long },
	} {
		p := transport.Publishing{RoutingKey: q, Mandatory: true}
		set(&p.Properties)
		e.tooLarge(c, p, field)
	}
	after()
	e.depth(c, q, 0)
}

// testHeaderNameLimit: a header name of 256 bytes is refused, at the top
// (the LimitError names it) or nested (it names the header it is in).
func testHeaderNameLimit(t *testing.T, e *env) {
	c, q, sub, after := limitsSetup(e)
	long := strings.Repeat("k", 256)
	e.tooLarge(c, transport.Publishing{RoutingKey: q, Headers: map[string]any{long: 1}}, long)
	e.tooLarge(c, transport.Publishing{RoutingKey: q, Headers: map[string]any{"outer": map[string]any{long: 1}}}, "outer")
	after()

	fits := strings.Repeat("k", 255)
	e.publish(c, transport.Publishing{RoutingKey: q, Body: []byte("255"), Headers: map[string]any{fits: "v"}})
	d := e.recvBody(sub, "255")
	e.wantString(d.Headers, fits, "v")
	e.ack(d)
}

// nested is a header value of depth levels of one-entry tables (arrays
// when arrays is set) around "leaf".
func nested(depth int, arrays bool) any {
	var v any = "leaf"
	for range depth {
		if arrays {
			v = []any{v}
		} else {
			v = map[string]any{"n": v}
		}
	}
	return v
}

// testHeaderDepthLimit: headers nested 33 deep are refused; 32 deep pass
// and read back, tables and arrays alike.
func testHeaderDepthLimit(t *testing.T, e *env) {
	c, q, sub, after := limitsSetup(e)
	for _, arrays := range []bool{false, true} {
		e.tooLarge(c, transport.Publishing{RoutingKey: q, Headers: map[string]any{"d": nested(33, arrays)}}, "header-depth")
		after()

		e.publish(c, transport.Publishing{RoutingKey: q, Body: []byte("32"), Headers: map[string]any{"d": nested(32, arrays)}})
		d := e.recvBody(sub, "32")
		v, depth := d.Headers["d"], 0
		for {
			if m, ok := v.(map[string]any); ok && !arrays {
				v = m["n"]
			} else if a, ok := v.([]any); ok && arrays && len(a) == 1 {
				v = a[0]
			} else {
				break
			}
			depth++
		}
		if depth != 32 || v != "leaf" {
			t.Errorf("read back %d levels around %#v, want 32 around \"leaf\" (arrays %v)", depth, v, arrays)
		}
		e.ack(d)
	}
}

// wide is a table of n entries.
func wide(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[strconv.Itoa(i)] = int32(i)
	}
	return m
}

// testHeaderEntriesLimit: amqp091-go reads at most 8192 entries in one
// table or array, each counted on its own: 8193 are refused, in the
// headers, a nested table or an array; 8192 in a table and 8192 in an
// array beside it pass and read back.
func testHeaderEntriesLimit(t *testing.T, e *env) {
	c, q, sub, after := limitsSetup(e)
	e.tooLarge(c, transport.Publishing{RoutingKey: q, Headers: wide(8193)}, "header-entries")
	e.tooLarge(c, transport.Publishing{RoutingKey: q, Headers: map[string]any{"t": wide(8193)}}, "header-entries")
	e.tooLarge(c, transport.Publishing{RoutingKey: q, Headers: map[string]any{"a": make([]any, 8193)}}, "header-entries")
	after()

	e.publish(c, transport.Publishing{RoutingKey: q, Body: []byte("8192"),
		Headers: map[string]any{"t": wide(8192), "a": make([]any, 8192)}})
	d := e.recvBody(sub, "8192")
	tb, _ := d.Headers["t"].(map[string]any)
	arr, _ := d.Headers["a"].([]any)
	if len(tb) != 8192 || len(arr) != 8192 {
		t.Fatalf("read back a table of %d and an array of %d, want 8192 each", len(tb), len(arr))
	}
	e.wantInt(tb, "8191", 8191)
	e.ack(d)
}

// testHeadersOverFrame: headers that do not fit the frame (131072 bytes
// by default) with room for dead-lettering are refused; a header of half
// the frame passes.
func testHeadersOverFrame(t *testing.T, e *env) {
	c, q, sub, after := limitsSetup(e)
	e.tooLarge(c, transport.Publishing{RoutingKey: q, Mandatory: true,
		Headers: map[string]any{"big": strings.Repeat("b", 131072)}}, "headers")
	e.tooLarge(c, transport.Publishing{RoutingKey: q, Mandatory: true,
		Headers: map[string]any{"a": strings.Repeat("a", 65536), "b": strings.Repeat("b", 65536)}}, "headers")
	after()

	half := strings.Repeat("h", 65536)
	e.publish(c, transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("half"), Headers: map[string]any{"h": half}})
	d := e.recvBody(sub, "half")
	e.wantString(d.Headers, "h", half)
	e.ack(d)
}
