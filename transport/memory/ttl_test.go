package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// rung declares the retry topology for queue src: exchange retry, src
// bound to it by name, and a rung with a 40s TTL leading home.
func (f *fixture) rung(src string) string {
	f.t.Helper()
	rung := src + ".retry.40s"
	f.declare(transport.Topology{
		Exchanges: []transport.Exchange{{Name: "acemq.retry", Kind: "direct", Durable: true}},
		Queues: []transport.Queue{
			{Name: src, Durable: true},
			{Name: rung, Durable: true, Args: map[string]any{
				"x-message-ttl":             int64(40000),
				"x-dead-letter-exchange":    "acemq.retry",
				"x-dead-letter-routing-key": src,
			}},
		},
		Bindings: []transport.Binding{{Queue: src, Exchange: "acemq.retry", Key: src}},
	})
	return rung
}

func TestTTLExpiresExactlyAtDeadlineInOrder(t *testing.T) {
	f := setup(t)
	rung := f.rung("orders")
	clock := f.b.Clock()
	f.send(rung, "a")
	clock.Advance(10 * time.Second)
	f.send(rung, "b")

	clock.Advance(30*time.Second - time.Millisecond)
	if got := f.b.Depth(rung); got != 2 {
		t.Fatalf("rung depth %d just before the first deadline, want 2", got)
	}
	clock.Advance(time.Millisecond)
	if got := f.bodies("orders"); len(got) != 1 || got[0] != "a" {
		t.Fatalf("orders holds %q at a's deadline, want [a]", got)
	}
	clock.Advance(10 * time.Second)
	if got := f.bodies("orders"); len(got) != 2 || got[1] != "b" {
		t.Fatalf("orders holds %q at b's deadline, want [a b]", got)
	}
	d := f.b.Peek("orders")[0]
	if d.Exchange != "acemq.retry" || d.RoutingKey != "orders" {
		t.Errorf("expired message shows %q/%q, want acemq.retry/orders", d.Exchange, d.RoutingKey)
	}
	x := deaths(t, d.Headers)[0]
	if !x["time"].(time.Time).Equal(memory.Epoch.Add(40 * time.Second)) {
		t.Errorf("x-death time %v, want the virtual expiry instant", x["time"])
	}
}

// TestTTLExpiryBeforeLaterTimer: expiries and timers share
// one order, so a server's in-process wait due after the expiry sees the
// message already home.
func TestTTLExpiryBeforeLaterTimer(t *testing.T) {
	f := setup(t)
	rung := f.rung("orders")
	sub := f.consume("orders", 1)
	clock := f.b.Clock()
	f.send(rung, "m")
	later := clock.After(41 * time.Second)

	clock.Advance(time.Minute)
	<-later
	f.ack(f.recv(sub, "m"))
}

func TestTTLZeroDeliversOnlyToAWaitingConsumer(t *testing.T) {
	f := setup(t)
	f.queue("zero", map[string]any{"x-message-ttl": 0})
	f.send("zero", "nobody waits")
	if f.b.Depth("zero") != 0 {
		t.Fatal("a zero-TTL message waited in the queue")
	}
	sub := f.consume("zero", 1)
	f.send("zero", "taken")
	f.ack(f.recv(sub, "taken"))
}

func TestUnackedMessagesDoNotExpire(t *testing.T) {
	f := setup(t)
	rung := f.rung("orders")
	sub := f.consume(rung, 1)
	f.send(rung, "held")
	d := f.recv(sub, "held")
	f.b.Clock().Advance(time.Hour)
	if f.b.Depth("orders") != 0 {
		t.Fatal("an unacked message expired")
	}
	// Given back after its deadline, it expires at once.
	f.reject(d, true)
	if got := f.bodies("orders"); len(got) != 1 {
		t.Fatalf("orders holds %q, want the expired message", got)
	}
}

func TestPerMessageExpirationAtHeadOnly(t *testing.T) {
	f := setup(t)
	f.declare(transport.Topology{
		Exchanges: []transport.Exchange{{Name: "dlx", Kind: "fanout", Durable: true}},
		Queues: []transport.Queue{
			{Name: "q", Durable: true, Args: map[string]any{"x-dead-letter-exchange": "dlx"}},
			{Name: "dead", Durable: true},
		},
		Bindings: []transport.Binding{{Queue: "dead", Exchange: "dlx"}},
	})
	f.send("q", "head")
	p := transport.Publishing{RoutingKey: "q", Body: []byte("short")}
	p.Expiration = "100"
	f.publish(p)

	f.b.Clock().Advance(time.Second)
	if got := f.bodies("q"); len(got) != 2 {
		t.Fatalf("q holds %q: an expired message behind the head must wait for it", got)
	}
	sub := f.consume("q", 1)
	f.ack(f.recv(sub, "head"))
	f.none(sub)
	dead := f.b.Peek("dead")
	if len(dead) != 1 || string(dead[0].Body) != "short" {
		t.Fatalf("dead holds %v, want the expired message", dead)
	}
	if dead[0].Expiration != "" {
		t.Errorf("dead-lettered Expiration %q, want none", dead[0].Expiration)
	}
	if x := deaths(t, dead[0].Headers)[0]; x["original-expiration"] != "100" || x["reason"] != "expired" {
		t.Errorf("x-death %v, want reason expired and original-expiration 100", x)
	}
}

func TestRealClockExpires(t *testing.T) {
	t.Parallel()
	b := memory.New(memory.WithRealClock())
	defer b.Close()
	c := b.Connect()
	ctx := context.Background()
	err := c.Declare(ctx, transport.Topology{Queues: []transport.Queue{
		{Name: "home", Durable: true},
		{Name: "wait", Durable: true, Args: map[string]any{
			"x-message-ttl": 20, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "home",
		}},
		{Name: "long", Durable: true, Args: map[string]any{"x-message-ttl": 3600000}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Consume(ctx, "home", transport.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"wait", "long"} {
		if _, err := c.Publish(ctx, transport.Publishing{RoutingKey: q, Body: []byte(q)}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case d := <-sub.Deliveries():
		if string(d.Body) != "wait" || d.Exchange != "" || d.RoutingKey != "home" {
			t.Errorf("got %q via %q/%q", d.Body, d.Exchange, d.RoutingKey)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a 20ms TTL never expired on the real clock")
	}
	// Close stops the hour-long expiry timer and returns at once.
	start := time.Now()
	if err := b.Close(); err != nil || time.Since(start) > 30*time.Second { // far below the hour it would wait
		t.Errorf("Close: %v after %v", err, time.Since(start))
	}
}
