package delay_test

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// key spells n units in the 28 bit-words, then queue.
func key(n uint64, queue string) string {
	var b strings.Builder
	for k := delay.Levels - 1; k >= 0; k-- {
		fmt.Fprintf(&b, "%d.", n>>k&1)
	}
	return b.String() + queue
}

func TestRouteTo(t *testing.T) {
	t.Parallel()
	u := delay.Unit
	type want struct {
		units    uint64
		exchange string
	}
	tests := []struct {
		name string
		d    time.Duration
		want want
	}{
		{"zero", 0, want{0, delay.Deliver}},
		{"negative", -time.Hour, want{0, delay.Deliver}},
		{"1ns rounds up", 1, want{1, delay.Level(0)}},
		{"1ms rounds up to 125ms", time.Millisecond, want{1, delay.Level(0)}},
		{"125ms", u, want{1, delay.Level(0)}},
		{"126ms", u + time.Millisecond, want{2, delay.Level(1)}},
		{"1s", time.Second, want{8, delay.Level(3)}},
		{"2.5s", 2500 * time.Millisecond, want{20, delay.Level(4)}},
		{"6h", 6 * time.Hour, want{172800, delay.Level(17)}},
		{"max", delay.Max, want{1<<28 - 1, delay.Level(27)}},
	}
	for k := 1; k < delay.Levels; k++ {
		n := uint64(1) << k
		tests = append(tests,
			struct {
				name string
				d    time.Duration
				want want
			}{fmt.Sprintf("2^%d-1", k), time.Duration(n-1) * u, want{n - 1, delay.Level(k - 1)}},
			struct {
				name string
				d    time.Duration
				want want
			}{fmt.Sprintf("2^%d", k), time.Duration(n) * u, want{n, delay.Level(k)}})
		if k < delay.Levels-1 || n+1 < 1<<delay.Levels {
			tests = append(tests, struct {
				name string
				d    time.Duration
				want want
			}{fmt.Sprintf("2^%d+1", k), time.Duration(n+1) * u, want{n + 1, delay.Level(k)}})
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := delay.RouteTo("orders.created", tt.d)
			if err != nil {
				t.Fatal(err)
			}
			if r.Exchange != tt.want.exchange {
				t.Errorf("exchange = %q, want %q", r.Exchange, tt.want.exchange)
			}
			if w := key(tt.want.units, "orders.created"); r.Key != w {
				t.Errorf("key = %q, want %q", r.Key, w)
			}
			if w := time.Duration(tt.want.units) * u; r.Wait != w {
				t.Errorf("wait = %v, want %v", r.Wait, w)
			}
			if tt.d > 0 && (r.Wait < tt.d || r.Wait-tt.d >= u) {
				t.Errorf("wait %v for %v: early, or late by a unit or more", r.Wait, tt.d)
			}
		})
	}
}

func TestRouteToRefuses(t *testing.T) {
	t.Parallel()
	if _, err := delay.RouteTo("q", delay.Max+1); !errors.Is(err, delay.ErrTooLong) {
		t.Errorf("one past the maximum: %v, want ErrTooLong", err)
	}
	if delay.Max != (1<<28-1)*125*time.Millisecond {
		t.Errorf("Max = %v", delay.Max)
	}
	long := strings.Repeat("q", delay.MaxQueueName)
	r, err := delay.RouteTo(long, delay.Max)
	if err != nil || len(r.Key) != 255 {
		t.Errorf("a %d-byte queue: key of %d bytes, %v; want 255, nil", len(long), len(r.Key), err)
	}
	for _, q := range []string{long + "q", "", "a.*", "#", "a.#.b"} {
		if _, err := delay.RouteTo(q, time.Second); !errors.Is(err, delay.ErrDestination) {
			t.Errorf("RouteTo(%q) = %v, want ErrDestination", q, err)
		}
		if _, err := delay.Bind(q); !errors.Is(err, delay.ErrDestination) {
			t.Errorf("Bind(%q) = %v, want ErrDestination", q, err)
		}
	}
	if _, err := delay.RouteTo("a*b.c#", time.Second); err != nil {
		t.Errorf("wildcards inside words are plain characters: %v", err)
	}
}

func TestBind(t *testing.T) {
	t.Parallel()
	b, err := delay.Bind("orders.created")
	if err != nil {
		t.Fatal(err)
	}
	want := transport.Binding{Queue: "orders.created", Exchange: "acemq.delay.v1.deliver",
		Key: strings.Repeat("*.", 28) + "orders.created"}
	if b != want {
		t.Errorf("Bind = %+v, want %+v", b, want)
	}
}

func TestTopology(t *testing.T) {
	t.Parallel()
	top := delay.Topology()
	if n := len(top.Exchanges); n != 30 {
		t.Errorf("%d exchanges, want 30", n)
	}
	if n := len(top.Queues); n != 29 {
		t.Errorf("%d queues, want 29", n)
	}
	exchanges := map[string]transport.Exchange{}
	for _, x := range top.Exchanges {
		exchanges[x.Name] = x
	}
	queues := map[string]transport.Queue{}
	for _, q := range top.Queues {
		queues[q.Name] = q
	}
	if x := exchanges["acemq.delay.v1.deliver"]; x.Kind != "topic" || !x.Durable ||
		x.Args["alternate-exchange"] != "acemq.delay.v1.undeliverable" {
		t.Errorf("deliver exchange = %+v", x)
	}
	if x := exchanges["acemq.delay.v1.undeliverable"]; x.Kind != "fanout" || !x.Durable {
		t.Errorf("undeliverable exchange = %+v", x)
	}
	if q := queues["acemq.delay.v1.undeliverable"]; !q.Durable || q.Args["x-queue-type"] != "quorum" ||
		q.Args["x-overflow"] != "reject-publish" || q.Args["x-message-ttl"] != nil || q.Args["x-dead-letter-exchange"] != nil {
		t.Errorf("undeliverable queue = %+v", q)
	}
	for k := range 28 {
		name := fmt.Sprintf("acemq.delay.v1.%02d", k)
		next := fmt.Sprintf("acemq.delay.v1.%02d", k-1)
		if k == 0 {
			next = "acemq.delay.v1.deliver"
		}
		if x := exchanges[name]; x.Kind != "topic" || !x.Durable || x.Args != nil {
			t.Errorf("exchange %s = %+v", name, x)
		}
		q := queues[name]
		wantArgs := map[string]any{
			"x-queue-type": "quorum", "x-message-ttl": int64(125) << k, "x-dead-letter-exchange": next,
			"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
		}
		if !q.Durable || fmt.Sprint(q.Args) != fmt.Sprint(wantArgs) {
			t.Errorf("queue %s = %+v, want args %v", name, q, wantArgs)
		}
		skip := strings.Repeat("*.", 27-k)
		wantBind := transport.Binding{Queue: name, Exchange: name, Key: skip + "1.#"}
		found := false
		for _, b := range top.Bindings {
			found = found || b == wantBind
		}
		if !found {
			t.Errorf("no binding %+v", wantBind)
		}
		wantX := transport.ExchangeBinding{Destination: next, Source: name, Key: skip + "0.#"}
		found = false
		for _, b := range top.ExchangeBindings {
			found = found || b == wantX
		}
		if !found {
			t.Errorf("no exchange binding %+v", wantX)
		}
	}
	if len(top.Bindings) != 29 || len(top.ExchangeBindings) != 28 {
		t.Errorf("%d bindings and %d exchange bindings, want 29 and 28", len(top.Bindings), len(top.ExchangeBindings))
	}
}

// TestRouteToSeconds: the boundaries of whole powers of two seconds, the
// levels of a layout of one level per second: 2^k s is 2^(k+3) units, on
// level k+3; a second less tops at level k+2; up to the last whole second
// under the maximum, and one past it refused.
func TestRouteToSeconds(t *testing.T) {
	t.Parallel()
	for k := range 25 {
		s := uint64(1) << k
		for _, n := range []uint64{s - 1, s, s + 1} {
			if n == 0 {
				continue
			}
			r, err := delay.RouteTo("q", time.Duration(n)*time.Second)
			if err != nil {
				t.Fatalf("%d s: %v", n, err)
			}
			units := 8 * n
			top := bits.Len64(units) - 1
			if r.Exchange != delay.Level(top) || r.Key != key(units, "q") || r.Wait != time.Duration(n)*time.Second {
				t.Errorf("%d s: %s %q after %v, want level %d, %d units", n, r.Exchange, r.Key, r.Wait, top, units)
			}
		}
	}
	if r, err := delay.RouteTo("q", (1<<25-1)*time.Second); err != nil || r.Exchange != delay.Level(27) {
		t.Errorf("the last whole second under the maximum: %+v, %v", r, err)
	}
	if _, err := delay.RouteTo("q", 1<<25*time.Second); !errors.Is(err, delay.ErrTooLong) {
		t.Errorf("2^25 s: %v, want ErrTooLong", err)
	}
}

// TestDestination: the queue a key names is what follows exactly 28
// bit-words; any other key, a foreign client's, names none, so that
// Redeliver cannot be steered by a key acemq would never write.
func TestDestination(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("q", delay.MaxQueueName)
	words := func(n int) string { return strings.Repeat("0.", n) }
	tests := []struct {
		key, want string
	}{
		{key(0, "orders.created"), "orders.created"},
		{key(1<<28-1, "q"), "q"},
		{key(5, long), long},
		{key(5, long+"q"), ""},
		{"", ""},
		{"1.q", ""},
		{words(27) + "q", ""},
		{words(27) + "0", ""},
		{words(28), ""},
		{words(27) + "2.q", ""},
		{"x." + words(27) + "q", ""},
		{words(27) + "1" + "q", ""},
		{key(1, "#"), ""},
		{key(1, "a.*"), ""},
		{key(1, "*.a"), ""},
		{key(1, "a*b"), "a*b"},
		{key(1, "0.q"), "0.q"}, // a destination may start with a 0 word
	}
	for _, tt := range tests {
		if got := delay.Destination(tt.key); got != tt.want {
			t.Errorf("Destination(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

// TestRedeliverForeignKeys: what a foreign client leaves in the
// undeliverable queue. A key naming no destination waits there for ever,
// counted under "" on every pass; one whose destination is a queue that
// exists goes straight to it, by the default exchange, whether or not
// that queue is bound to the delay queues.
func TestRedeliverForeignKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := memory.New()
	t.Cleanup(func() { _ = b.Close() })
	c := b.Connect()
	if err := c.Declare(ctx, delay.Topology()); err != nil {
		t.Fatal(err)
	}
	if err := c.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: "unbound", Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"", "junk", key(0, "#"), key(0, "missing"), key(0, "unbound")} {
		conf, err := c.Publish(ctx, transport.Publishing{Exchange: delay.Deliver, RoutingKey: k, Mandatory: true, Body: []byte(k)})
		if err != nil || !conf.Routed {
			t.Fatalf("publish %q: %+v, %v", k, conf, err)
		}
	}
	if n := b.Depth(delay.Undeliverable); n != 5 {
		t.Fatalf("%d undeliverable, want all 5", n)
	}
	for pass := range 2 {
		r, err := delay.Redeliver(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"": 3, "missing": 1}
		arrived := 1
		if pass > 0 {
			arrived = 0
		}
		if r.Arrived != arrived || fmt.Sprint(r.Waiting) != fmt.Sprint(want) {
			t.Errorf("pass %d: %+v, want %d arrived and waiting %v", pass, r, arrived, want)
		}
		if n := b.Depth(delay.Undeliverable); n != 4 {
			t.Errorf("pass %d: %d undeliverable, want 4", pass, n)
		}
	}
	if got := b.Peek("unbound"); len(got) != 1 || got[0].RoutingKey != "unbound" || got[0].Exchange != "" {
		t.Errorf("unbound holds %v", got)
	}
}

// TestRedeliverOnly: a server's redelivery moves only the messages for its
// own queues; one for another existing queue is put back to wait, so a
// client that may publish to the delay exchanges cannot have the server
// put a message into any queue of the vhost.
func TestRedeliverOnly(t *testing.T) {
	t.Parallel()
	b := memory.New()
	defer b.Close()
	c := b.Connect()
	defer c.Close()
	ctx := context.Background()
	if err := c.Declare(ctx, delay.Topology()); err != nil {
		t.Fatal(err)
	}
	if err := c.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: "mine", Durable: true}, {Name: "payroll", Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"mine", "payroll"} { // neither bound: both land undeliverable
		r, _ := delay.RouteTo(q, 0)
		if _, err := c.Publish(ctx, transport.Publishing{Exchange: r.Exchange, RoutingKey: r.Key, Mandatory: true, Body: []byte(q)}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := delay.Redeliver(ctx, c, delay.Only("mine"))
	if err != nil || r.Arrived != 1 || r.Skipped != 1 || len(r.Waiting) != 0 {
		t.Fatalf("Redeliver(Only mine) = %+v, %v", r, err)
	}
	if b.Depth("mine") != 1 || b.Depth("payroll") != 0 || b.Depth(delay.Undeliverable) != 1 {
		t.Errorf("mine %d, payroll %d, undeliverable %d; want 1, 0, 1", b.Depth("mine"), b.Depth("payroll"), b.Depth(delay.Undeliverable))
	}
}

func TestNames(t *testing.T) {
	qs, xs := delay.Queues(), delay.Exchanges()
	if len(qs) != delay.Levels+1 || qs[0] != delay.Undeliverable || qs[1] != delay.Level(0) || qs[delay.Levels] != delay.Level(27) {
		t.Errorf("Queues() = %v", qs)
	}
	if len(xs) != delay.Levels+2 || xs[0] != delay.Deliver || xs[1] != delay.Undeliverable || xs[delay.Levels+1] != delay.Level(27) {
		t.Errorf("Exchanges() = %v", xs)
	}
	top := delay.Topology()
	if len(top.Queues) != len(qs) || len(top.Exchanges) != len(xs) {
		t.Errorf("Topology declares %d queues and %d exchanges; Queues and Exchanges name %d and %d", len(top.Queues), len(top.Exchanges), len(qs), len(xs))
	}
}
