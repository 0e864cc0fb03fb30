package memory_test

import (
	"strings"
	"testing"

	"github.com/acemq/acemq/transport"
)

func TestDeclareRefusals(t *testing.T) {
	f := setup(t)
	f.queue("classic", map[string]any{"x-message-ttl": 1000})
	f.queue("quorum", map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 3})
	f.declare(transport.Topology{Exchanges: []transport.Exchange{{Name: "x", Kind: "direct", Durable: true}}})

	q := func(name string, durable bool, args map[string]any) transport.Topology {
		return transport.Topology{Queues: []transport.Queue{{Name: name, Durable: durable, Args: args}}}
	}
	x := func(name, kind string, durable bool) transport.Topology {
		return transport.Topology{Exchanges: []transport.Exchange{{Name: name, Kind: kind, Durable: durable}}}
	}
	for _, tc := range []struct {
		name   string
		top    transport.Topology
		target error // nil: any error, but no sentinel
		words  []string
	}{
		{"other TTL", q("classic", true, map[string]any{"x-message-ttl": 2000}), transport.ErrPreconditionFailed, []string{"classic", "x-message-ttl", "2000", "1000"}},
		{"made quorum", q("classic", true, map[string]any{"x-message-ttl": 1000, "x-queue-type": "quorum"}), transport.ErrPreconditionFailed, []string{"x-queue-type"}},
		{"not durable", q("classic", false, map[string]any{"x-message-ttl": 1000}), transport.ErrPreconditionFailed, []string{"durable"}},
		{"other limit", q("quorum", true, map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 5}), transport.ErrPreconditionFailed, []string{"x-delivery-limit"}},
		{"type dropped", q("quorum", true, map[string]any{"x-delivery-limit": 3}), transport.ErrPreconditionFailed, []string{"x-queue-type"}},
		{"negative TTL", q("new1", true, map[string]any{"x-message-ttl": -1}), transport.ErrPreconditionFailed, []string{"x-message-ttl"}},
		{"string TTL", q("new2", true, map[string]any{"x-message-ttl": "1000"}), transport.ErrPreconditionFailed, []string{"x-message-ttl"}},
		{"float TTL", q("new2", true, map[string]any{"x-message-ttl": 1.5}), transport.ErrPreconditionFailed, []string{"x-message-ttl"}},
		{"key without exchange", q("new3", true, map[string]any{"x-dead-letter-routing-key": "k"}), transport.ErrPreconditionFailed, []string{"x-dead-letter-routing-key"}},
		{"numeric exchange", q("new3", true, map[string]any{"x-dead-letter-exchange": 1}), transport.ErrPreconditionFailed, []string{"x-dead-letter-exchange"}},
		{"unknown queue type", q("new4", true, map[string]any{"x-queue-type": "lazy"}), transport.ErrPreconditionFailed, []string{"x-queue-type"}},
		{"quorum not durable", q("new5", false, map[string]any{"x-queue-type": "quorum"}), transport.ErrPreconditionFailed, []string{"non-durable"}},
		{"reserved queue name", q("amq.mine", true, nil), transport.ErrAccessRefused, []string{"amq."}},
		{"unsupported arg type", q("new6", true, map[string]any{"x-bad": struct{}{}}), nil, []string{"x-bad"}},
		{"stream", q("new7", true, map[string]any{"x-queue-type": "stream"}), nil, []string{"stream"}},
		{"server-named", q("", true, nil), nil, []string{"name"}},
		{"exchange kind", x("x", "fanout", true), transport.ErrPreconditionFailed, []string{"type", "fanout", "direct"}},
		{"exchange durability", x("x", "direct", false), transport.ErrPreconditionFailed, []string{"durable"}},
		{"unknown kind", x("y", "x-delayed-message", true), nil, []string{"x-delayed-message"}},
		{"empty kind", x("y", "", true), nil, []string{"type"}},
		{"default exchange", x("", "direct", true), transport.ErrAccessRefused, []string{"default"}},
		{"reserved exchange", x("amq.direct", "direct", true), transport.ErrAccessRefused, []string{"amq."}},
		{"bind default", transport.Topology{Bindings: []transport.Binding{{Queue: "classic", Exchange: "", Key: "k"}}}, transport.ErrAccessRefused, []string{"default"}},
		{"bind missing queue", transport.Topology{Bindings: []transport.Binding{{Queue: "nope", Exchange: "x"}}}, transport.ErrNotFound, []string{"nope"}},
		{"bind missing exchange", transport.Topology{Bindings: []transport.Binding{{Queue: "classic", Exchange: "nope"}}}, transport.ErrNotFound, []string{"nope"}},
	} {
		err := f.c.Declare(f.ctx, tc.top)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if tc.target != nil {
			wantErr(t, tc.name, err, tc.target)
		}
		for _, w := range tc.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not mention %q", tc.name, err, w)
			}
		}
	}

	// Nothing changed, nothing was created, and the connection works.
	if got, _ := f.b.Queue("classic"); got.Args["x-message-ttl"] != int32(1000) || !got.Durable {
		t.Errorf("classic is now %+v", got)
	}
	for _, name := range []string{"new1", "new2", "new3", "new4", "new5", "new6", "new7", "amq.mine"} {
		if _, ok := f.b.Queue(name); ok {
			t.Errorf("refused queue %s exists", name)
		}
	}
	if _, ok := f.b.Exchange("y"); ok {
		t.Error("refused exchange y exists")
	}
	f.queue("classic", map[string]any{"x-message-ttl": int64(1000), "x-unchecked": "ignored"})
	f.send("classic", "fine")
}

func TestDeclareIsIdempotentAndBindsOnce(t *testing.T) {
	f := setup(t)
	top := transport.Topology{
		Exchanges: []transport.Exchange{{Name: "x", Kind: "direct", Durable: true}},
		Queues:    []transport.Queue{{Name: "q", Durable: true}},
		Bindings:  []transport.Binding{{Queue: "q", Exchange: "x", Key: "k"}, {Queue: "q", Exchange: "x", Key: "k"}},
	}
	f.declare(top)
	f.declare(top)
	if got := f.b.Bindings("q"); len(got) != 1 || got[0] != (transport.Binding{Queue: "q", Exchange: "x", Key: "k"}) {
		t.Fatalf("Bindings = %v", got)
	}
	f.publish(transport.Publishing{Exchange: "x", RoutingKey: "k", Body: []byte("once")})
	if f.b.Depth("q") != 1 {
		t.Fatalf("depth %d, want one copy", f.b.Depth("q"))
	}
	if x, ok := f.b.Exchange("amq.topic"); !ok || x.Kind != "topic" {
		t.Errorf("amq.topic = %+v, %v; want the predeclared topic exchange", x, ok)
	}
}

func TestRouting(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{
		Exchanges: []transport.Exchange{{Name: "t", Kind: "topic", Durable: true}, {Name: "h", Kind: "headers", Durable: true}},
		Queues: []transport.Queue{
			{Name: "star", Durable: true}, {Name: "hash", Durable: true}, {Name: "exact", Durable: true}, {Name: "all", Durable: true},
		},
		Bindings: []transport.Binding{
			{Queue: "star", Exchange: "t", Key: "orders.*"},
			{Queue: "hash", Exchange: "t", Key: "#.eu"},
			{Queue: "exact", Exchange: "t", Key: "orders.placed.eu"},
			{Queue: "all", Exchange: "h"},
		},
	})
	for _, key := range []string{"orders.placed", "orders.placed.eu", "eu", "orders", "x.y.eu"} {
		f.publish(transport.Publishing{Exchange: "t", RoutingKey: key, Body: []byte(key)})
	}
	f.publish(transport.Publishing{Exchange: "h", RoutingKey: "whatever", Body: []byte("h")})
	want := map[string]string{
		"star":  "orders.placed",
		"hash":  "orders.placed.eu eu x.y.eu",
		"exact": "orders.placed.eu",
		"all":   "h",
	}
	for q, w := range want {
		if got := strings.Join(f.bodies(q), " "); got != w {
			t.Errorf("%s holds %q, want %q", q, got, w)
		}
	}
}
