package wire_test

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// keys are the names a fuzzed header table draws from: the contract's,
// the broker's, and some of neither.
var keys = []string{
	wire.ID, wire.Attempt, wire.Error, wire.Created, wire.Exchange, wire.RoutingKey,
	"x-death", "x-delivery-count", "x-acquired-count", "CC", "BCC", "x-first-death-queue", "x-last-death-reason",
	"x-first-death", "tenant", "traceparent", "",
}

// table builds a header table from fuzz input: each entry takes a key byte
// and a kind byte, and its value from what follows; nested tables go four
// deep at most.
func table(data []byte, s string, depth int) map[string]any {
	h := map[string]any{}
	for len(data) >= 2 {
		k, kind := keys[int(data[0])%len(keys)], data[1]
		data = data[2:]
		var n uint64
		if len(data) >= 8 {
			n = binary.LittleEndian.Uint64(data)
		}
		var v any
		switch kind % 17 {
		case 0:
			v = s
		case 1:
			v = []byte(s)
		case 2:
			v = int8(n)
		case 3:
			v = int16(n)
		case 4:
			v = int32(n)
		case 5:
			v = int64(n)
		case 6:
			v = int(n)
		case 7:
			v = uint64(n)
		case 8:
			v = uint32(n)
		case 9:
			v = math.Float64frombits(n)
		case 10:
			v = math.Float32frombits(uint32(n))
		case 11:
			v = time.Unix(int64(n)>>20, 0)
		case 12:
			v = n&1 == 0
		case 13:
			v = nil
		case 14, 15: // a nested table, alone or in an array, made of the next bytes
			if depth < 4 {
				sub := data[:min(len(data), 24)]
				data = data[len(sub):]
				v = table(sub, s, depth+1)
				if kind%17 == 15 {
					v = []any{s, int64(n), v}
				}
			}
		case 16:
			v = string(data)
		}
		h[k] = v
		data = data[min(len(data), 1+int(n%8)):]
	}
	return h
}

// FuzzRead feeds Read and Copy header tables of every type a producer
// might write: neither may panic, Read must give a usable attempt, and a
// copy must never carry a header the broker owns.
func FuzzRead(f *testing.F) {
	f.Add([]byte{0, 0, 1, 5, 1, 2, 3, 4, 5, 6, 7, 8}, "7", "reason")
	f.Add([]byte{3, 16, '2', '0', '2', '4', 3, 11, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, "2024-03-01T09:00:00Z", "")
	f.Add([]byte{1, 9, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f, 6, 14, 6, 1, 7, 15}, "NaN", "")
	f.Add([]byte{10, 15, 11, 14, 12, 7, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, " -3 ", "x")
	f.Fuzz(func(t *testing.T, data []byte, s, reason string) {
		d := transport.Delivery{Queue: "q", RoutingKey: "q", Headers: table(data, s, 0),
			Properties: transport.Properties{MessageID: s, Expiration: s, UserID: s}, Body: data}
		env := wire.Read(d)
		if env.Attempt < 1 || env.DeliveryCount < 0 {
			t.Fatalf("Read gave attempt %d, delivery count %d", env.Attempt, env.DeliveryCount)
		}
		pub := wire.Copy(d, env, "q.dlq", env.Attempt+1, reason)
		for k := range pub.Headers {
			if wire.IsBrokerOwned(k) {
				t.Fatalf("the copy carries the broker's %s", k)
			}
		}
		if pub.Expiration != "" || pub.UserID != "" {
			t.Fatalf("the copy carries expiration %q, user id %q", pub.Expiration, pub.UserID)
		}
		if _, ok := pub.Headers[wire.Error]; ok != (reason != "") {
			t.Fatalf("x-acemq-error present %v with reason %q", ok, reason)
		}
		got := wire.Read(transport.Delivery{Headers: pub.Headers})
		if got.ID != env.ID || env.Attempt < 1<<31-1 && got.Attempt != env.Attempt+1 ||
			env.CreatedAt.UnixMilli() > 0 && got.CreatedAt.UnixMilli() != env.CreatedAt.UnixMilli() {
			t.Fatalf("the copy reads back as %+v from %+v", got, env)
		}
	})
}
