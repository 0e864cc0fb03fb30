package memory_test

import (
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// TestXDeathCountsAndMovesToFront: a message rejected in a, then b, then a
// again carries one entry per queue and reason, the newest first, counted;
// x-first-death-* keep the first death.
func TestXDeathCountsAndMovesToFront(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{
		Queues: []transport.Queue{
			{Name: "a", Durable: true, Args: map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "b"}},
			{Name: "b", Durable: true, Args: map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "a"}},
		},
	})
	f.send("a", "m")
	for _, q := range []string{"a", "b", "a"} {
		d, ok, err := f.c.Get(f.ctx, q)
		if err != nil || !ok {
			t.Fatalf("Get %s: %v, %v", q, ok, err)
		}
		f.reject(d, false)
	}
	d := f.b.Peek("b")[0]
	x := deaths(t, d.Headers)
	if len(x) != 2 || x[0]["queue"] != "a" || x[0]["count"] != int64(2) || x[1]["queue"] != "b" || x[1]["count"] != int64(1) {
		t.Fatalf("x-death %v, want a×2 then b×1", x)
	}
	if rk, _ := x[1]["routing-keys"].([]any); len(rk) != 1 || rk[0] != "b" {
		t.Errorf("b's entry routing-keys %v, want [b]", rk)
	}
	if d.Headers["x-first-death-queue"] != "a" || d.Headers["x-first-death-reason"] != "rejected" {
		t.Errorf("x-first-death-* %v / %v, want a / rejected", d.Headers["x-first-death-queue"], d.Headers["x-first-death-reason"])
	}
}

// TestAutomaticCycleDropped: expiry from a queue whose dead-letter route
// leads back to a queue already in x-death, with no rejection on the way,
// drops the message, as RabbitMQ does.
func TestAutomaticCycleDropped(t *testing.T) {
	f := setup(t)
	ttlTo := func(next string) map[string]any {
		return map[string]any{"x-message-ttl": 1000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": next}
	}
	f.declare(transport.Topology{Queues: []transport.Queue{
		{Name: "self", Durable: true, Args: ttlTo("self")},
		{Name: "ping", Durable: true, Args: ttlTo("pong")},
		{Name: "pong", Durable: true, Args: ttlTo("ping")},
	}})
	f.send("self", "s")
	f.send("ping", "p")
	f.b.Clock().Advance(time.Second)
	if f.b.Depth("self") != 0 || f.b.Depth("pong") != 1 {
		t.Fatalf("after one TTL: self %d pong %d, want 0 and 1", f.b.Depth("self"), f.b.Depth("pong"))
	}
	f.b.Clock().Advance(time.Second)
	if f.b.Depth("ping") != 0 || f.b.Depth("pong") != 0 {
		t.Fatalf("the cycle went round: ping %d pong %d", f.b.Depth("ping"), f.b.Depth("pong"))
	}
}

// TestCycleWithRejectionKept: a rejection in the loop makes it a client's
// decision, not a cycle.
func TestCycleWithRejectionKept(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{Queues: []transport.Queue{
		{Name: "work", Durable: true, Args: map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "wait"}},
		{Name: "wait", Durable: true, Args: map[string]any{"x-message-ttl": 1000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work"}},
	}})
	f.send("work", "m")
	for range 3 {
		d, ok, _ := f.c.Get(f.ctx, "work")
		if !ok {
			t.Fatal("the message did not come back to work")
		}
		f.reject(d, false)
		f.b.Clock().Advance(time.Second)
	}
}

func TestMissingDeadLetterExchangeDrops(t *testing.T) {
	f := setup(t)
	f.queue("q", map[string]any{"x-dead-letter-exchange": "nowhere"})
	sub := f.consume("q", 1)
	f.send("q", "m")
	f.reject(f.recv(sub, "m"), false)
	if f.b.Depth("q") != 0 || f.b.Unacked("q") != 0 {
		t.Fatal("a message rejected to a missing exchange stayed")
	}
}

// TestMissingBindingLosesRungMessage: classic dead-lettering is
// at-most-once, so a rung's message with no way home is gone.
func TestMissingBindingLosesRungMessage(t *testing.T) {
	f := setup(t)
	rung := f.rung("orders")
	if !f.b.Unbind(transport.Binding{Queue: "orders", Exchange: "acemq.retry", Key: "orders"}) {
		t.Fatal("Unbind found no binding")
	}
	f.send(rung, "m")
	f.b.Clock().Advance(time.Minute)
	if f.b.Depth(rung) != 0 || f.b.Depth("orders") != 0 {
		t.Fatal("the message survived a missing binding")
	}
}

func TestRejectWithoutDeadLetterExchangeDrops(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	f.send("q", "m")
	d, _, _ := f.c.Get(f.ctx, "q")
	f.reject(d, false)
	if f.b.Depth("q") != 0 {
		t.Fatal("rejected message stayed")
	}
}

// TestDeadLetterKeepsCCRoutes: with no
// x-dead-letter-routing-key the message keeps its keys, CC ones included.
func TestDeadLetterKeepsCCRoutes(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{
		Exchanges: []transport.Exchange{{Name: "dlx", Kind: "direct", Durable: true}},
		Queues: []transport.Queue{
			{Name: "q", Durable: true, Args: map[string]any{"x-dead-letter-exchange": "dlx"}},
			{Name: "dead.main", Durable: true},
			{Name: "dead.cc", Durable: true},
		},
		Bindings: []transport.Binding{
			{Queue: "dead.main", Exchange: "dlx", Key: "q"},
			{Queue: "dead.cc", Exchange: "dlx", Key: "other"},
		},
	})
	f.publish(transport.Publishing{RoutingKey: "q", Body: []byte("m"), Headers: map[string]any{"CC": []string{"other"}}})
	if f.b.Depth("q") != 1 {
		t.Fatal("publish with a CC to a missing queue failed to reach q")
	}
	d, _, _ := f.c.Get(f.ctx, "q")
	f.reject(d, false)
	for _, q := range []string{"dead.main", "dead.cc"} {
		got := f.b.Peek(q)
		if len(got) != 1 || got[0].RoutingKey != "q" {
			t.Fatalf("%s holds %v, want the message under its first key", q, got)
		}
		rk, _ := deaths(t, got[0].Headers)[0]["routing-keys"].([]any)
		if len(rk) != 2 || rk[0] != "q" || rk[1] != "other" {
			t.Errorf("x-death routing-keys %v, want [q other]", rk)
		}
	}
}

// TestQuorumGivenBackCounts: on 3.10 a delivery given back by a
// closing consumer counts toward the limit too.
func TestQuorumGivenBackCounts(t *testing.T) {
	f := setup(t)
	f.queue("qq", map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 1})
	f.send("qq", "m")
	for i := range 2 {
		s, err := f.c.Consume(f.ctx, "qq", transport.ConsumeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d := f.recv(s, "m")
		if n, _ := d.Headers["x-delivery-count"].(int64); n != int64(i) {
			t.Errorf("delivery %d: x-delivery-count %v", i, d.Headers["x-delivery-count"])
		}
		_ = s.Close()
	}
	if f.b.Depth("qq") != 0 {
		t.Fatal("a message given back past the limit stayed")
	}
}

// TestClassicQueueIgnoresDeliveryLimit: x-delivery-limit is a quorum
// queue argument; classic queues of 3.10 redeliver forever and add no
// x-delivery-count.
func TestClassicQueueIgnoresDeliveryLimit(t *testing.T) {
	f := setup(t)
	f.queue("q", map[string]any{"x-delivery-limit": 0})
	f.send("q", "m")
	sub := f.consume("q", 1)
	for range 3 {
		d := f.recv(sub, "m")
		if _, ok := d.Headers["x-delivery-count"]; ok {
			t.Fatal("classic queue added x-delivery-count")
		}
		f.reject(d, true)
	}
}

// TestDeadLetterRoutingKeyDropsCC: with x-dead-letter-routing-key the
// message travels under that key alone and loses its CC header.
func TestDeadLetterRoutingKeyDropsCC(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{Queues: []transport.Queue{
		{Name: "q", Durable: true, Args: map[string]any{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"}},
		{Name: "dead", Durable: true},
		{Name: "other", Durable: true},
	}})
	f.publish(transport.Publishing{RoutingKey: "q", Body: []byte("m"), Headers: map[string]any{"CC": []any{"nowhere"}}})
	d, _, _ := f.c.Get(f.ctx, "q")
	f.reject(d, false)
	got := f.b.Peek("dead")
	if len(got) != 1 || got[0].RoutingKey != "dead" {
		t.Fatalf("dead holds %v", got)
	}
	if _, ok := got[0].Headers["CC"]; ok {
		t.Error("CC survived dead-lettering under x-dead-letter-routing-key")
	}
	if rk, _ := deaths(t, got[0].Headers)[0]["routing-keys"].([]any); len(rk) != 2 || rk[1] != "nowhere" {
		t.Errorf("x-death routing-keys %v, want [q nowhere]", rk)
	}
}
