package wire_test

import (
	"encoding/binary"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/internal/wire/wiretest"
	"github.com/acemq/acemq/transport"
)

// death is an x-death entry as RabbitMQ 3.10.8 writes it (checked there
// for a quorum queue's delivery limit): count, exchange, queue, reason,
// routing-keys, time.
func death(queue, reason string, count int64) map[string]any {
	return map[string]any{
		"count": count, "exchange": "", "queue": queue, "reason": reason,
		"routing-keys": []any{queue}, "time": time.Unix(1700000000, 0).UTC(),
	}
}

// deadLetter is a delivery from orders.dlq that the broker put there, with
// x-death entries newest first.
func deadLetter(deaths ...any) transport.Delivery {
	return transport.Delivery{Queue: "orders.dlq", Exchange: "acemq.dlx", RoutingKey: "orders",
		Headers: map[string]any{wire.ID: "m-1", wire.Attempt: int64(2), "x-death": deaths}}
}

// TestBrokerReasons: a message the broker dead-lettered reads back with
// the broker's reason in words, from its newest x-death entry, exactly as
// the wire contract lists it.
func TestBrokerReasons(t *testing.T) {
	t.Parallel()
	const limit = "the broker dead-lettered it from queue orders: it reached the queue's delivery limit: it went back to the queue " +
		"unacknowledged (a consumer crashed, was cut off, timed out or gave it back) more times than x-delivery-limit allows (delivery_limit)"
	tests := []struct {
		name string
		d    transport.Delivery
		want string
	}{
		{"delivery limit", deadLetter(death("orders", "delivery_limit", 1)), limit},
		{"expired", deadLetter(death("orders", "expired", 1)),
			"the broker dead-lettered it from queue orders: it expired, having waited there longer than its time to live (expired)"},
		{"rejected", deadLetter(death("orders", "rejected", 1)),
			"the broker dead-lettered it from queue orders: a consumer rejected it without requeueing it (rejected)"},
		{"maxlen", deadLetter(death("orders", "maxlen", 1)),
			"the broker dead-lettered it from queue orders: the queue was over its length limit (x-max-length or x-max-length-bytes) (maxlen)"},
		{"a reason of a later broker", deadLetter(death("orders", "something_new", 1)),
			"the broker dead-lettered it from queue orders (something_new)"},
		{"counted more than once", deadLetter(death("orders", "rejected", 3)),
			"the broker dead-lettered it from queue orders: a consumer rejected it without requeueing it (rejected, 3 times)"},
		{"the newest entry is the one", deadLetter(death("orders", "delivery_limit", 1), death("orders.retry.40s", "expired", 1)), limit},
		{"x-acemq-error wins", func() transport.Delivery {
			d := deadLetter(death("orders", "delivery_limit", 1))
			d.Headers[wire.Error] = "exhausted 3 attempts: no"
			return d
		}(), "exhausted 3 attempts: no"},
		{"strings as bytes", deadLetter(map[string]any{"queue": []byte("orders"), "reason": []byte("maxlen"), "count": int32(1)}),
			"the broker dead-lettered it from queue orders: the queue was over its length limit (x-max-length or x-max-length-bytes) (maxlen)"},
		{"a count in words is no count", deadLetter(map[string]any{"queue": "orders", "reason": "rejected", "count": "many"}),
			"the broker dead-lettered it from queue orders: a consumer rejected it without requeueing it (rejected)"},
		{"no count", deadLetter(map[string]any{"queue": "orders", "reason": "rejected"}),
			"the broker dead-lettered it from queue orders: a consumer rejected it without requeueing it (rejected)"},

		// Waits of the library's own: on the way back to work.
		{"back from a rung", transport.Delivery{Queue: "orders", Headers: map[string]any{"x-death": []any{death("orders.retry.40s", "expired", 1)}}}, ""},
		{"back from a rung of 1h30m", deadLetter(death("orders.retry.1h30m", "expired", 2)), ""},
		{"back from a rung of 250ms", deadLetter(death("orders.retry.250ms", "expired", 1)), ""},
		{"back from the delay queues", deadLetter(death("acemq.delay.v1.00", "expired", 1), death("acemq.delay.v1.03", "expired", 1)), ""},
		{"rejected on a rung is a reason", deadLetter(death("orders.retry.40s", "rejected", 1)),
			"the broker dead-lettered it from queue orders.retry.40s: a consumer rejected it without requeueing it (rejected)"},
		{"a queue named like a rung but not one", deadLetter(death("orders.retry.soon", "expired", 1)),
			"the broker dead-lettered it from queue orders.retry.soon: it expired, having waited there longer than its time to live (expired)"},

		// What other clients may write: no reason, never a panic.
		{"no x-death", transport.Delivery{Headers: map[string]any{}}, ""},
		{"no headers", transport.Delivery{}, ""},
		{"x-death a string", transport.Delivery{Headers: map[string]any{"x-death": "delivery_limit"}}, ""},
		{"x-death a table", transport.Delivery{Headers: map[string]any{"x-death": death("orders", "rejected", 1)}}, ""},
		{"x-death empty", deadLetter(), ""},
		{"entry not a table", deadLetter("orders", death("orders", "rejected", 1)), ""},
		{"entry nil", deadLetter(nil), ""},
		{"queue not a string", deadLetter(map[string]any{"queue": int64(7), "reason": "rejected"}), ""},
		{"reason not a string", deadLetter(map[string]any{"queue": "orders", "reason": []any{"rejected"}}), ""},
		{"empty queue", deadLetter(death("", "rejected", 1)), ""},
		{"empty reason", deadLetter(death("orders", "", 1)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := wire.Read(tt.d).Error; got != tt.want {
				t.Errorf("Error =\n%q, want\n%q", got, tt.want)
			}
		})
	}
}

// TestBrokerReasonsShowHostileTextSafely: a queue name or reason that is
// huge, not UTF-8 or not printable comes out quoted and cut, so that a
// reason stays one readable line of bounded size.
func TestBrokerReasonsShowHostileTextSafely(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, queue, reason string
		want                string
	}{
		{"a megabyte queue name", strings.Repeat("q", 1<<20), "rejected",
			`the broker dead-lettered it from queue "` + strings.Repeat("q", 255) + `"...: a consumer rejected it without requeueing it (rejected)`},
		{"a newline", "orders\nFAKE LOG LINE", "rejected",
			`the broker dead-lettered it from queue "orders\nFAKE LOG LINE": a consumer rejected it without requeueing it (rejected)`},
		{"not UTF-8", "ord\xffers", "maxlen",
			`the broker dead-lettered it from queue "ord\xffers": the queue was over its length limit (x-max-length or x-max-length-bytes) (maxlen)`},
		{"a huge reason", "orders", strings.Repeat("r", 1<<20),
			`the broker dead-lettered it from queue orders ("` + strings.Repeat("r", 64) + `"...)`},
		{"an escape in the reason", "orders", "\x1b[31mred", `the broker dead-lettered it from queue orders ("\x1b[31mred")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := wire.Read(deadLetter(death(tt.queue, tt.reason, 1))).Error
			if got != tt.want {
				t.Errorf("Error =\n%q, want\n%q", got, tt.want)
			}
		})
	}
}

// TestBrokerReasonsAreDocumented: every reason read from x-death is one
// of the contract's, so that a replay keeping attempts writes a documented
// x-acemq-error.
func TestBrokerReasonsAreDocumented(t *testing.T) {
	t.Parallel()
	doc := wiretest.Load(t, contract)
	for _, reason := range []string{"delivery_limit", "expired", "rejected", "maxlen", "something_new"} {
		for _, count := range []int64{1, 2, 20} {
			for _, queue := range []string{"orders", "shipping.orders.v2", "a queue\twith a tab"} {
				got := wire.Read(deadLetter(death(queue, reason, count))).Error
				if !slices.ContainsFunc(doc.Reasons, func(r *regexp.Regexp) bool { return r.MatchString(got) }) {
					t.Errorf("%q is none of the documented reasons", got)
				}
			}
		}
	}
}

// TestReplayDropsTheBrokerReason: a replay copies a broker dead letter
// without x-death, so the copy reads back with no reason; one that keeps
// attempts carries the reason as a documented x-acemq-error.
func TestReplayDropsTheBrokerReason(t *testing.T) {
	t.Parallel()
	doc := wiretest.Load(t, contract)
	d := deadLetter(death("orders", "delivery_limit", 1))
	d.Headers[wire.Created] = int64(1700000000000)
	d.Headers[wire.Exchange], d.Headers[wire.RoutingKey] = "", "orders"
	d.Headers["x-first-death-reason"] = "delivery_limit"
	env := wire.Read(d)
	if env.Error == "" {
		t.Fatal("the dead letter reads back with no reason")
	}

	replayed := wire.Copy(d, env, "orders", 1, "")
	if _, ok := replayed.Headers["x-death"]; ok {
		t.Error("the replayed copy carries x-death")
	}
	if got := wire.Read(transport.Delivery{Queue: "orders", Headers: replayed.Headers}).Error; got != "" {
		t.Errorf("the replayed copy reads back with the reason %q", got)
	}

	kept := wire.Copy(d, env, "orders", env.Attempt, env.Error)
	err := doc.Check(kept.Headers, wiretest.Want{ID: "m-1", Attempt: 2, Created: 1700000000000, RoutingKey: "orders", GivenUp: true})
	if err != nil {
		t.Error(err)
	}
	if got := wire.Read(transport.Delivery{Queue: "orders", Headers: kept.Headers}).Error; got != env.Error {
		t.Errorf("a replay keeping attempts reads back as %q, want %q", got, env.Error)
	}
}

// FuzzBrokerReason feeds Read x-death headers of every shape another
// client might write: entries of any type, fields of any type and size.
// Nothing panics, and a reason is one line of valid UTF-8 of bounded size
// that the contract documents.
func FuzzBrokerReason(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 2, 2}, "orders", "delivery_limit")
	f.Add([]byte{3, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, "orders.retry.40s", "expired")
	f.Add([]byte{7, 1, 2, 3}, "ord\xffers\n", "\x00")
	f.Add([]byte{1, 9, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f}, "acemq.delay.v1.04", "expired")
	doc := wiretest.Load(f, contract)
	f.Fuzz(func(t *testing.T, data []byte, queue, reason string) {
		var deaths []any
		for len(data) >= 2 {
			shape, field := data[0], data[1]
			data = data[2:]
			var n uint64
			if len(data) >= 8 {
				n = binary.LittleEndian.Uint64(data)
				data = data[8:]
			}
			entry := map[string]any{}
			values := []any{queue, []byte(queue), reason, int64(n), int32(n), uint64(n), math.Float64frombits(n),
				nil, true, []any{queue}, map[string]any{"queue": queue}, time.Unix(int64(n>>40), 0)}
			entry["queue"] = values[int(field)%len(values)]
			entry["reason"] = values[int(field>>4)%len(values)]
			entry["count"] = values[int(shape>>4)%len(values)]
			switch shape % 4 {
			case 0:
				deaths = append(deaths, entry)
			case 1:
				deaths = append(deaths, map[string]any{"queue": queue, "reason": reason, "count": int64(n)})
			case 2:
				deaths = append(deaths, values[int(field)%len(values)])
			case 3:
				deaths = append(deaths, []any{entry})
			}
		}
		var x any = deaths
		if len(deaths) > 0 && deaths[0] == nil {
			x = queue // not even an array
		}
		got := wire.Read(transport.Delivery{Headers: map[string]any{"x-death": x}}).Error
		if got == "" {
			return
		}
		if !utf8.ValidString(got) || strings.ContainsAny(got, "\n\r") || len(got) > 2048 { // a 255-byte queue name quoted at 4 bytes a byte, and the words
			t.Fatalf("reason %q: not one bounded line of UTF-8", got)
		}
		if !slices.ContainsFunc(doc.Reasons, func(r *regexp.Regexp) bool { return r.MatchString(got) }) {
			t.Fatalf("%q is none of the documented reasons", got)
		}
	})
}
