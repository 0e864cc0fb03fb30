package memory_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

func TestPublishRefusals(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	for _, tc := range []struct {
		name   string
		p      transport.Publishing
		target error
		word   string
	}{
		{"missing exchange", transport.Publishing{Exchange: "nope", RoutingKey: "q"}, transport.ErrNotFound, "nope"},
		{"unsupported header", transport.Publishing{RoutingKey: "q", Headers: map[string]any{"h": struct{}{}}}, nil, "h"},
		{"nested unsupported", transport.Publishing{RoutingKey: "q", Headers: map[string]any{"t": map[string]any{"c": make(chan int)}}}, nil, "c"},
		{"overflowing uint64", transport.Publishing{RoutingKey: "q", Headers: map[string]any{"n": uint64(math.MaxUint64)}}, nil, "overflows"},
		{"bad expiration", transport.Publishing{RoutingKey: "q", Properties: transport.Properties{Expiration: "soon"}}, transport.ErrPreconditionFailed, "soon"},
		{"other user", transport.Publishing{RoutingKey: "q", Properties: transport.Properties{UserID: "mallory"}}, transport.ErrPreconditionFailed, "mallory"},
		{"CC not an array", transport.Publishing{RoutingKey: "q", Headers: map[string]any{"CC": "q"}}, transport.ErrPreconditionFailed, "CC"},
	} {
		_, err := f.c.Publish(f.ctx, tc.p)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if tc.target != nil {
			wantErr(t, tc.name, err, tc.target)
		}
		if !strings.Contains(err.Error(), tc.word) {
			t.Errorf("%s: %q does not mention %q", tc.name, err, tc.word)
		}
	}
	if f.b.Depth("q") != 0 {
		t.Fatal("a refused publish was routed")
	}
	// The user's own name is fine.
	f.publish(transport.Publishing{RoutingKey: "q", Properties: transport.Properties{UserID: memory.User}})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.c.Publish(ctx, transport.Publishing{RoutingKey: "q"})
	wantErr(t, "publish with a cancelled context", err, transport.ErrUnconfirmed)
}

func TestHeaderTypesAsTheAMQPTransportDelivers(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	stamp := time.Date(2024, 2, 3, 4, 5, 6, 789, time.FixedZone("x", 3600))
	f.publish(transport.Publishing{RoutingKey: "q", Headers: map[string]any{
		"int": 7, "big": math.MaxInt32 + 1, "u8": uint8(8), "u16": uint16(16), "u32": uint32(32), "u64": uint64(64),
		"strs": []string{"a", "b"}, "time": stamp, "nil": nil, "empty": map[string]any{},
		"BCC": []any{"hidden"},
	}, Properties: transport.Properties{Timestamp: stamp}})
	d := f.b.Peek("q")[0]
	want := map[string]any{
		"int": int32(7), "big": int64(math.MaxInt32 + 1), "u8": int16(8), "u16": int32(16), "u32": int64(32), "u64": int64(64),
	}
	for k, w := range want {
		if d.Headers[k] != w {
			t.Errorf("%s = %#v, want %#v", k, d.Headers[k], w)
		}
	}
	if s, ok := d.Headers["strs"].([]any); !ok || len(s) != 2 || s[0] != "a" {
		t.Errorf("strs = %#v, want []any{a, b}", d.Headers["strs"])
	}
	wantTime := time.Unix(stamp.Unix(), 0).UTC()
	if d.Headers["time"] != wantTime || d.Timestamp != wantTime {
		t.Errorf("times %v and %v, want whole UTC seconds %v", d.Headers["time"], d.Timestamp, wantTime)
	}
	if v, ok := d.Headers["nil"]; !ok || v != nil {
		t.Errorf("nil header = %#v, %v", v, ok)
	}
	if m, ok := d.Headers["empty"].(map[string]any); !ok || len(m) != 0 {
		t.Errorf("empty table = %#v", d.Headers["empty"])
	}
	if _, ok := d.Headers["BCC"]; ok {
		t.Error("BCC reached the consumer")
	}
}

func TestPublishKeepsNoReferenceToCallerMemory(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	body := []byte("body")
	headers := map[string]any{"t": map[string]any{"k": "v"}, "b": []byte("raw")}
	f.publish(transport.Publishing{RoutingKey: "q", Headers: headers, Body: body})
	body[0] = 'X'
	headers["t"].(map[string]any)["k"] = "changed"
	headers["b"].([]byte)[0] = 'X'
	headers["new"] = 1
	d := f.b.Peek("q")[0]
	if string(d.Body) != "body" || d.Headers["t"].(map[string]any)["k"] != "v" || string(d.Headers["b"].([]byte)) != "raw" || d.Headers["new"] != nil {
		t.Fatalf("stored message changed with the caller's memory: %q %v", d.Body, d.Headers)
	}
	if err := d.Ack(); err == nil {
		t.Error("a peeked message could be acked")
	}
}

func TestRoundRobinIsExact(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	s1, s2 := f.consume("q", 10), f.consume("q", 10)
	for _, b := range []string{"0", "1", "2", "3"} {
		f.send("q", b)
	}
	f.recv(s1, "0")
	f.recv(s2, "1")
	f.recv(s1, "2")
	f.recv(s2, "3")
	if f.b.Unacked("q") != 4 {
		t.Errorf("Unacked = %d, want 4", f.b.Unacked("q"))
	}
}

// TestRequeueRestoresOrder: a classic queue puts given-back messages back
// in their original order ahead of the rest, whatever the order of the
// rejects.
func TestRequeueRestoresOrder(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	for _, b := range []string{"a", "b", "c", "d"} {
		f.send("q", b)
	}
	sub := f.consume("q", 3)
	a, b, c := f.recv(sub, "a"), f.recv(sub, "b"), f.recv(sub, "c")
	if err := sub.Cancel(f.ctx); err != nil { // settleable still, but no more deliveries
		t.Fatal(err)
	}
	f.reject(c, true)
	f.reject(a, true)
	f.ack(b)
	if got := strings.Join(f.bodies("q"), ""); got != "acd" {
		t.Fatalf("queue order %q, want acd", got)
	}
	for _, d := range f.b.Peek("q") {
		if d.Redelivered != (string(d.Body) != "d") {
			t.Errorf("%s redelivered %v", d.Body, d.Redelivered)
		}
	}
}

func TestDeleteQueueUnderConsumer(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	sub := f.consume("q", 1)
	f.send("q", "held")
	f.send("q", "ready")
	held := f.recv(sub, "held")

	if !f.b.DeleteQueue("q") || f.b.DeleteQueue("q") {
		t.Fatal("DeleteQueue should report true once")
	}
	if _, ok := <-sub.Deliveries(); ok {
		t.Fatal("Deliveries still open after the queue was deleted")
	}
	_, err := f.c.Inspect(f.ctx, "q")
	wantErr(t, "Inspect after delete", err, transport.ErrNotFound)

	f.queue("q", nil) // a new queue of the same name
	if err := held.Reject(true); err != nil {
		t.Fatalf("settling a delivery of a deleted queue: %v", err)
	}
	if f.b.Depth("q") != 0 {
		t.Fatal("a message of the deleted queue reached its successor")
	}
}

func TestCloseGivesBackGetAndSubscriptionDeliveries(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	for _, b := range []string{"a", "b"} {
		f.send("q", b)
	}
	other := f.b.Connect()
	got, _, _ := other.Get(f.ctx, "q")
	sub, err := other.Consume(f.ctx, "q", transport.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Cancel(f.ctx); err != nil {
		t.Fatal(err)
	}
	if f.b.Unacked("q") != 2 || f.b.Depth("q") != 0 {
		t.Fatalf("unacked %d ready %d, want 2 and 0", f.b.Unacked("q"), f.b.Depth("q"))
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.bodies("q"), ""); got != "ab" {
		t.Fatalf("queue holds %q after Close, want ab", got)
	}
	wantErr(t, "Ack after Close", got.Ack(), transport.ErrStaleDelivery)
	if err := sub.Close(); err != nil {
		t.Errorf("subscription Close after its connection's: %v", err)
	}
}

func TestConsumeOptions(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	for _, p := range []int{-1, 65536} {
		if _, err := f.c.Consume(f.ctx, "q", transport.ConsumeOptions{Prefetch: p}); err == nil {
			t.Errorf("prefetch %d accepted", p)
		}
	}
	f.consume("q", 0)
	if _, err := f.c.Consume(f.ctx, "q", transport.ConsumeOptions{Tag: "mine"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Consume(f.ctx, "q", transport.ConsumeOptions{Tag: "mine"}); err == nil {
		t.Error("a consumer tag was reused")
	}
}

func TestBrokerClose(t *testing.T) {
	t.Parallel()
	b := memory.New()
	c := b.Connect()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	ctx := context.Background()
	wantErr(t, "Declare after the broker closed", c.Declare(ctx, transport.Topology{}), transport.ErrClosed)
	wantErr(t, "Declare on a connection made after", b.Connect().Declare(ctx, transport.Topology{}), transport.ErrClosed)
}

// TestConnTellsBrokerTime: a server on a connection finds the broker's
// clock through transport.Clocked, so its waits move with Advance.
func TestConnTellsBrokerTime(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := memory.NewClock(start)
	b := memory.New(memory.WithClock(clock))
	var tr transport.Transport = b.Connect()
	clocked, ok := tr.(transport.Clocked)
	if !ok {
		t.Fatal("a memory connection is not transport.Clocked")
	}
	if clocked.Clock() != transport.Clock(clock) || b.Clock() != clock {
		t.Fatal("the connection does not tell time by the broker's clock")
	}
	wait := clocked.Clock().After(time.Second)
	clock.Advance(time.Second)
	if got := <-wait; !got.Equal(start.Add(time.Second)) {
		t.Errorf("woke at %v", got)
	}
}

// TestLongHeldDeliveryWhileOthersFlow: one delivery held for long while
// thousands pass by and are acked; Close gives back exactly that one.
func TestLongHeldDeliveryWhileOthersFlow(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	sub := f.consume("q", 8)
	f.send("q", "held")
	held := f.recv(sub, "held")
	for i := range 5000 {
		f.send("q", "m")
		d := f.recv(sub, "m")
		if i%2 == 0 {
			f.ack(d)
		} else {
			f.reject(d, false)
		}
	}
	if f.b.Unacked("q") != 1 {
		t.Fatalf("Unacked = %d, want the held one", f.b.Unacked("q"))
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.bodies("q"); len(got) != 1 || got[0] != "held" {
		t.Fatalf("queue holds %v after Close, want [held]", got)
	}
	wantErr(t, "Ack after Close", held.Ack(), transport.ErrStaleDelivery)
}

// TestQuorumReturns: a quorum queue counts every given-back message, and
// puts it at the back of the queue in the order it came back, or serves
// it first when the queue has a delivery limit: RabbitMQ 3.10.8 does both.
func TestQuorumReturns(t *testing.T) {
	for _, tt := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"no delivery limit: at the back", map[string]any{"x-queue-type": "quorum"}, "dcab"},
		{"a delivery limit: served first", map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 10}, "cabd"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			f.queue("qq", tt.args)
			for _, b := range []string{"a", "b", "c", "d"} {
				f.send("qq", b)
			}
			sub := f.consume("qq", 3)
			a, b, c := f.recv(sub, "a"), f.recv(sub, "b"), f.recv(sub, "c")
			if err := sub.Cancel(f.ctx); err != nil {
				t.Fatal(err)
			}
			f.reject(c, true)
			f.reject(a, true)
			f.reject(b, true)
			if got := strings.Join(f.bodies("qq"), ""); got != tt.want {
				t.Fatalf("quorum queue order %q, want %s", got, tt.want)
			}
			for range 4 {
				d, ok, err := f.c.Get(f.ctx, "qq")
				if err != nil || !ok {
					t.Fatalf("Get: %v %v", ok, err)
				}
				returned := string(d.Body) != "d"
				if count := d.Headers["x-delivery-count"]; returned && (count != int64(1) || !d.Redelivered) {
					t.Errorf("Get of returned %s: x-delivery-count %v redelivered %v", d.Body, count, d.Redelivered)
				}
			}
		})
	}
}
