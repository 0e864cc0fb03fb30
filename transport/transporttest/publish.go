package transporttest

import (
	"bytes"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// testPublishConsumeAck: body, headers of every documented type and all
// properties survive the round trip; an acked message is gone.
func testPublishConsumeAck(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	sub := e.consume(c, q, 1)

	stamp := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	p := transport.Publishing{
		RoutingKey: q,
		Mandatory:  true,
		Headers: map[string]any{
			"x-int":    42,
			"x-int64":  int64(1) << 40,
			"x-string": "hello",
			"x-bool":   true,
			"x-float":  1.5,
			"x-bytes":  []byte("raw"),
			"x-time":   stamp,
			"x-table":  map[string]any{"a": 1, "b": "two", "c": map[string]any{"d": "deep"}},
			"x-array":  []any{1, "two", map[string]any{"three": 3}},
		},
		Properties: transport.Properties{
			ContentType: "application/json", ContentEncoding: "identity", DeliveryMode: 2,
			Priority: 3, CorrelationID: "corr-1", ReplyTo: "reply-q", MessageID: "msg-1",
			Timestamp: stamp, Type: "order.placed", AppID: "transporttest",
		},
		Body: []byte(`{"n":1}`),
	}
	if conf := e.publish(c, p); !conf.Routed {
		t.Fatal("publish to an existing queue: Routed false")
	}
	d := e.recvBody(sub, `{"n":1}`)

	if d.Queue != q || d.Exchange != "" || d.RoutingKey != q || d.Redelivered {
		t.Errorf("delivery queue %q exchange %q key %q redelivered %v; want %q, \"\", %q, false",
			d.Queue, d.Exchange, d.RoutingKey, d.Redelivered, q, q)
	}
	wantProps := p.Properties
	gotProps := d.Properties
	if !gotProps.Timestamp.Equal(stamp) {
		t.Errorf("Timestamp %v, want %v", gotProps.Timestamp, stamp)
	}
	gotProps.Timestamp, wantProps.Timestamp = time.Time{}, time.Time{}
	if gotProps != wantProps {
		t.Errorf("properties %+v, want %+v", gotProps, wantProps)
	}

	h := d.Headers
	e.wantInt(h, "x-int", 42)
	e.wantInt(h, "x-int64", 1<<40)
	e.wantString(h, "x-string", "hello")
	if h["x-bool"] != true {
		t.Errorf("x-bool = %#v", h["x-bool"])
	}
	if h["x-float"] != 1.5 {
		t.Errorf("x-float = %#v", h["x-float"])
	}
	if b, ok := h["x-bytes"].([]byte); !ok || !bytes.Equal(b, []byte("raw")) {
		t.Errorf("x-bytes = %#v", h["x-bytes"])
	}
	if ts, ok := h["x-time"].(time.Time); !ok || !ts.Equal(stamp) {
		t.Errorf("x-time = %#v, want %v", h["x-time"], stamp)
	}
	table, ok := h["x-table"].(map[string]any)
	if !ok {
		t.Fatalf("x-table = %#v (%T), want a map[string]any", h["x-table"], h["x-table"])
	}
	e.wantInt(table, "a", 1)
	e.wantString(table, "b", "two")
	if deep, ok := table["c"].(map[string]any); !ok || deep["d"] != "deep" {
		t.Errorf("x-table.c = %#v, want a map[string]any with d: deep", table["c"])
	}
	arr, ok := h["x-array"].([]any)
	if !ok || len(arr) != 3 {
		t.Fatalf("x-array = %#v, want a []any of 3", h["x-array"])
	}
	if n, ok := asInt(arr[0]); !ok || n != 1 || arr[1] != "two" {
		t.Errorf("x-array = %#v", arr)
	}
	if m, ok := arr[2].(map[string]any); !ok {
		t.Errorf("x-array[2] = %#v, want a map[string]any", arr[2])
	} else {
		e.wantInt(m, "three", 3)
	}

	e.ack(d)
	e.depth(c, q, 0)
	e.none(sub)
}

// testEmptyBodyNoHeaders: a message with nothing in it is still a message.
func testEmptyBodyNoHeaders(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	e.publish(c, transport.Publishing{RoutingKey: q})
	sub := e.consume(c, q, 1)
	d := e.recv(sub)
	if len(d.Body) != 0 || len(d.Headers) != 0 {
		t.Errorf("body %q headers %v, want both empty", d.Body, d.Headers)
	}
	e.ack(d)
}

// testHeadersAreCopies: a consumer changing what it received changes
// nothing on the broker.
func testHeadersAreCopies(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	e.publish(c, transport.Publishing{RoutingKey: q, Body: []byte("body"),
		Headers: map[string]any{"k": "v", "t": map[string]any{"n": 1}}})
	sub := e.consume(c, q, 1)
	d := e.recvBody(sub, "body")
	d.Headers["k"] = "changed"
	d.Headers["added"] = true
	if tb, ok := d.Headers["t"].(map[string]any); ok {
		tb["n"] = 99
	}
	d.Body[0] = 'X'
	e.reject(d, true)

	again := e.recvBody(sub, "body")
	e.wantString(again.Headers, "k", "v")
	if _, ok := again.Headers["added"]; ok {
		t.Error("a header the consumer added reached the broker")
	}
	tb, _ := again.Headers["t"].(map[string]any)
	e.wantInt(tb, "n", 1)
	e.ack(again)
}

// testMandatory: an unroutable mandatory publish is confirmed with Routed
// false and no error; a routed one is Routed true and arrives showing the
// exchange and key it was published with.
func testMandatory(t *testing.T, e *env) {
	c := e.conn()
	x := e.name("x")
	q := e.name("q")
	e.declare(c, transport.Topology{
		Exchanges: []transport.Exchange{{Name: x, Kind: "direct", Durable: true}},
		Queues:    []transport.Queue{{Name: q, Durable: true}},
	})

	for _, p := range []transport.Publishing{
		{RoutingKey: e.name("no-such-queue"), Mandatory: true, Body: []byte("lost")},
		{Exchange: x, RoutingKey: "unbound", Mandatory: true, Body: []byte("lost")},
	} {
		conf, err := c.Publish(e.ctx(), p)
		if err != nil || conf.Routed {
			t.Fatalf("unroutable mandatory publish to %q/%q: Routed %v error %v; want false, nil",
				p.Exchange, p.RoutingKey, conf.Routed, err)
		}
	}

	e.declare(c, transport.Topology{Bindings: []transport.Binding{{Queue: q, Exchange: x, Key: "k"}}})
	if conf := e.publish(c, transport.Publishing{Exchange: x, RoutingKey: "k", Mandatory: true, Body: []byte("found")}); !conf.Routed {
		t.Fatal("routed mandatory publish: Routed false")
	}
	// Not mandatory and unroutable: confirmed, no error.
	e.publish(c, transport.Publishing{Exchange: x, RoutingKey: "unbound", Body: []byte("dropped")})

	sub := e.consume(c, q, 1)
	d := e.recvBody(sub, "found")
	if d.Exchange != x || d.RoutingKey != "k" {
		t.Errorf("delivery exchange %q key %q, want %q, %q", d.Exchange, d.RoutingKey, x, "k")
	}
	e.ack(d)
	e.none(sub)
}

// testPublishToMissingExchange: ErrNotFound, and the transport goes on
// working (on RabbitMQ only the channel died).
func testPublishToMissingExchange(t *testing.T, e *env) {
	c := e.conn()
	q := e.queue(c, "q", nil)
	_, err := c.Publish(e.ctx(), transport.Publishing{Exchange: e.name("missing"), RoutingKey: q, Mandatory: true})
	e.wantErr("publish to a missing exchange", err, transport.ErrNotFound)

	e.send(c, q, "after")
	sub := e.consume(c, q, 1)
	e.ack(e.recvBody(sub, "after"))
}

// testFanout: a fanout exchange copies a message to every bound queue.
func testFanout(t *testing.T, e *env) {
	c := e.conn()
	x, q1, q2 := e.name("fan"), e.name("q1"), e.name("q2")
	e.declare(c, transport.Topology{
		Exchanges: []transport.Exchange{{Name: x, Kind: "fanout", Durable: true}},
		Queues:    []transport.Queue{{Name: q1, Durable: true}, {Name: q2, Durable: true}},
		Bindings:  []transport.Binding{{Queue: q1, Exchange: x, Key: "a"}, {Queue: q2, Exchange: x, Key: "b"}},
	})
	if conf := e.publish(c, transport.Publishing{Exchange: x, RoutingKey: "any", Mandatory: true, Body: []byte("m")}); !conf.Routed {
		t.Fatal("fanout publish: Routed false")
	}
	for _, q := range []string{q1, q2} {
		sub := e.consume(c, q, 1)
		d := e.recvBody(sub, "m")
		if d.Exchange != x || d.RoutingKey != "any" {
			t.Errorf("%s: exchange %q key %q", q, d.Exchange, d.RoutingKey)
		}
		e.ack(d)
	}
}
