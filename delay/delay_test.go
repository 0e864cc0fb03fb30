package delay_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
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
