package acemq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// Lateness bounds of the scheduled publishes on RabbitMQ. Both ends are
// this machine's clock: the publisher's x-acemq-due and the consumer's
// arrival. The due time is rounded down to a millisecond, and RabbitMQ
// expires by whole milliseconds too, hence the skew. dueLate is generous:
// the broker's latency through the levels on a machine as busy as two
// test runs make it; a message on a wrong path is caught by its x-death
// (the conformance suite's DelayLevels), one held up (undeliverable's
// 10 s) by this.
const (
	dueSkew = 5 * time.Millisecond
	dueLate = 3 * time.Second
)

// TestRabbitPublishDelayed: scheduled publishes on RabbitMQ, after a
// delay, at a time, at a time past (delivered now, by the deliver
// exchange), arrive no earlier than the x-acemq-due the publisher stamped
// and late by less than dueLate; each is logged. One to a missing queue
// fails at publish and reaches no broker.
func TestRabbitPublishDelayed(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	ctx := context.Background()
	q := r.queue()
	declareDelayed(t, r.tr, q)
	t.Cleanup(func() { _, _ = r.admin.QueueDelete(q, false, false, false) })
	p := &acemq.Publisher{Transport: r.tr, Mandatory: true}
	sub, err := r.tr.Consume(ctx, q, transport.ConsumeOptions{Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })

	now := time.Now()
	type scheduled struct {
		name string
		o    acemq.Outgoing
		wait time.Duration // Delay's, rounded up: due no earlier than this after the publish
		now  bool          // due at once: published to the deliver exchange
	}
	tests := []scheduled{
		{"after 600ms", acemq.Outgoing{Delay: 600 * time.Millisecond}, 625 * time.Millisecond, false},
		{"after 1.1s", acemq.Outgoing{Delay: 1100 * time.Millisecond}, 1125 * time.Millisecond, false},
		{"at, 1.3s on", acemq.Outgoing{At: now.Add(1300 * time.Millisecond)}, 0, false},
		{"at, past", acemq.Outgoing{At: now.Add(-time.Hour)}, 0, true},
		{"at, now", acemq.Outgoing{At: now}, 0, true},
	}
	published := map[string]time.Time{}
	ids := map[string]string{}
	for _, tt := range tests {
		o := tt.o
		o.RoutingKey, o.Body = q, []byte(tt.name)
		before := time.Now()
		res, err := p.Publish(ctx, o)
		if err != nil || !res.Routed {
			t.Fatalf("%s: %+v, %v", tt.name, res, err)
		}
		published[tt.name], ids[tt.name] = before, res.ID
	}
	for range tests {
		var d transport.Delivery
		select {
		case d = <-sub.Deliveries():
		case <-time.After(30 * time.Second):
			t.Fatal("a scheduled message did not arrive within 30s")
		}
		arrived := time.Now()
		name := string(d.Body)
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(tests, func(tt scheduled) bool { return tt.name == name })
		if i < 0 {
			t.Fatalf("arrived %q", name)
		}
		tt := tests[i]
		dueMs, ok := transport.Int64(d.Headers[delay.DueHeader])
		if !ok {
			t.Errorf("%s: %s = %#v", name, delay.DueHeader, d.Headers[delay.DueHeader])
			continue
		}
		due := time.UnixMilli(dueMs)
		late := arrived.Sub(due)
		t.Logf("%s: arrived %v after its %s", name, late, delay.DueHeader)
		if late < -dueSkew || late > dueLate {
			t.Errorf("%s: arrived %v after due, want %v to %v", name, late, -dueSkew, dueLate)
		}
		if early := published[name].Add(tt.wait).Truncate(time.Millisecond); due.Before(early) {
			t.Errorf("%s: due %v, before %v", name, due, early)
		}
		if !tt.o.At.IsZero() && due.Before(tt.o.At.Truncate(time.Millisecond)) {
			t.Errorf("%s: due %v, before the time asked, %v", name, due, tt.o.At)
		}
		if d.Headers["x-acemq-id"] != ids[name] || d.Headers["x-acemq-routing-key"] != q {
			t.Errorf("%s: headers %v", name, d.Headers)
		}
		if rt, _ := delay.RouteTo(q, 0); tt.now && d.RoutingKey != rt.Key {
			t.Errorf("%s: routing key %q, want %q", name, d.RoutingKey, rt.Key)
		}
		if tt.now && (d.Exchange != delay.Deliver || d.Headers["x-death"] != nil) {
			t.Errorf("%s: from exchange %q with x-death %v, want %s and none", name, d.Exchange, d.Headers["x-death"], delay.Deliver)
		}
	}

	rec := &publishCounter{Transport: r.tr}
	p.Transport = rec
	_, err = p.Publish(ctx, acemq.Outgoing{RoutingKey: q + ".missing", Delay: time.Second})
	var pe *acemq.PublishError
	if !errors.Is(err, acemq.ErrUnroutable) || !errors.As(err, &pe) || !pe.Unroutable {
		t.Errorf("to a missing queue: %v, want a PublishError wrapping ErrUnroutable", err)
	}
	if _, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: q, Delay: delay.Max + 1}); !errors.Is(err, delay.ErrTooLong) {
		t.Errorf("over the maximum: %v, want ErrTooLong", err)
	}
	if n := rec.count(); n != 0 {
		t.Errorf("%d refused publishes reached the broker", n)
	}
}

// TestRabbitPublishDelayedDestinationDeleted: a queue deleted on RabbitMQ
// while its message waits: when due the message waits in the
// undeliverable queue (counted by delay.Redeliver as waiting for it), and
// arrives, once, when the queue is back. The undeliverable queue is the
// vhost's: other tests' servers may move the message round too, which
// changes who counts it, not where it goes.
func TestRabbitPublishDelayedDestinationDeleted(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	ctx := context.Background()
	q := r.queue()
	declareDelayed(t, r.tr, q)
	t.Cleanup(func() { _, _ = r.admin.QueueDelete(q, false, false, false) })
	p := &acemq.Publisher{Transport: r.tr, Mandatory: true}
	res, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: q, Body: []byte("m"), Delay: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.admin.QueueDelete(q, false, false, false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	waiting := 0
	r.eventually("the message waits in "+delay.Undeliverable, func() bool {
		red, err := delay.Redeliver(ctx, r.tr)
		if err != nil {
			t.Fatal(err)
		}
		if red.Arrived > 0 {
			t.Logf("this pass delivered %d of other tests' messages", red.Arrived)
		}
		waiting += red.Waiting[q]
		return waiting > 0
	})
	if waiting != 1 {
		t.Errorf("counted %d waiting for %s, want 1", waiting, q)
	}
	declareDelayed(t, r.tr, q)
	red, err := delay.Redeliver(ctx, r.tr)
	if err != nil {
		t.Fatal(err)
	}
	d := r.take(q)
	if red.Arrived == 0 {
		t.Logf("another redeliverer in the vhost moved it")
	}
	if string(d.Body) != "m" || d.Headers["x-acemq-id"] != res.ID || d.RoutingKey != q {
		t.Errorf("arrived %q by key %q, headers %v", d.Body, d.RoutingKey, d.Headers)
	}
	if _, ok := transport.Int64(d.Headers[delay.DueHeader]); !ok {
		t.Errorf("%s = %#v", delay.DueHeader, d.Headers[delay.DueHeader])
	}
	time.Sleep(250 * time.Millisecond)
	if n := r.depth(q); n != 0 {
		t.Errorf("%d more in %s: delivered twice", n, q)
	}
}

// privateDelays declares delay.Topology with its prefix replaced, so that
// what waits on its levels is this test's alone, and deletes its queues
// when the test ends. It returns the renaming.
func privateDelays(t *testing.T, tr transport.Transport, prefix string) func(string) string {
	t.Helper()
	rename := func(s string) string {
		if rest, ok := strings.CutPrefix(s, delay.Prefix); ok {
			return prefix + rest
		}
		return s
	}
	args := func(m map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			if s, ok := v.(string); ok {
				v = rename(s)
			}
			out[k] = v
		}
		return out
	}
	var top transport.Topology
	full := delay.Topology()
	for _, x := range full.Exchanges {
		top.Exchanges = append(top.Exchanges, transport.Exchange{Name: rename(x.Name), Kind: x.Kind, Durable: true, Args: args(x.Args)})
	}
	for _, q := range full.Queues {
		top.Queues = append(top.Queues, transport.Queue{Name: rename(q.Name), Durable: true, Args: args(q.Args)})
	}
	for _, b := range full.Bindings {
		top.Bindings = append(top.Bindings, transport.Binding{Queue: rename(b.Queue), Exchange: rename(b.Exchange), Key: b.Key})
	}
	for _, b := range full.ExchangeBindings {
		top.ExchangeBindings = append(top.ExchangeBindings, transport.ExchangeBinding{Destination: rename(b.Destination), Source: rename(b.Source), Key: b.Key})
	}
	if err := tr.Declare(context.Background(), top); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		del, ok := tr.(interface {
			DeleteQueue(context.Context, string) error
		})
		if !ok {
			t.Errorf("%T cannot delete the private delay queues", tr)
			return
		}
		for _, q := range top.Queues {
			if err := del.DeleteQueue(context.Background(), q.Name); err != nil {
				t.Errorf("delete %s: %v", q.Name, err)
			}
		}
	})
	return rename
}

// foreignPublisher is python3-pika publishing each message (JSON:
// exchange, key, body) on stdin, confirmed and mandatory, and printing
// for each whether a queue took it.
const foreignPublisher = `
import json, sys
import pika
conn = pika.BlockingConnection(pika.URLParameters(sys.argv[1]))
ch = conn.channel()
ch.confirm_delivery()
out = []
for m in json.load(sys.stdin):
    try:
        ch.basic_publish(exchange=m["exchange"], routing_key=m["key"], body=m["body"].encode(),
                         properties=pika.BasicProperties(delivery_mode=2), mandatory=True)
        out.append(True)
    except pika.exceptions.UnroutableError:
        out.append(False)
conn.close()
print(json.dumps(out))
`

// foreignMessage is one message the foreign client publishes to the
// private layout: to level Level's exchange (-1: the deliver exchange).
type foreignMessage struct {
	Level int    `json:"-"`
	Ex    string `json:"exchange"`
	Key   string `json:"key"`
	Body  string `json:"body"`
}

// bitWords spells n in the 28 bit-words of the wire contract.
func bitWords(n uint64) []string {
	w := make([]string, delay.Levels)
	for k := range delay.Levels {
		w[delay.Levels-1-k] = fmt.Sprint(n >> k & 1)
	}
	return w
}

// hostileKeys are routing keys acemq never writes, to the private layout:
// too few words, words neither 0 nor 1 (at, below and above the level
// published to), keys of 255 bytes, wildcard words as a destination.
func hostileKeys(dest, long, missing string) []foreignMessage {
	with := func(n uint64, w int, s string) []string { ws := bitWords(n); ws[w] = s; return ws }
	key := func(ws []string, to string) string { return strings.Join(ws, ".") + "." + to }
	destWords := strings.Split(dest, ".")
	ms := []foreignMessage{
		{Level: 0, Key: "1." + dest},
		{Level: 0, Key: ""},
		{Level: 3, Key: key(with(8, 24, "2"), dest)},
		{Level: 27, Key: key(with(1<<27, 0, "x"), dest)},
		{Level: 0, Key: key(bitWords(1)[1:], dest)},
		{Level: 27, Key: "1.junk"},
		{Level: 1, Key: key(with(3, 27, "x"), dest)},
		{Level: 0, Key: key(with(1, 0, "x"), dest)},
		{Level: 5, Key: key(bitWords(1), dest)},
		{Level: -1, Key: key(strings.Split(strings.Repeat("w.", 27)+"w", "."), dest)},
		{Level: 0, Key: key(bitWords(1), long)},
		{Level: 0, Key: key(bitWords(1), missing)},
		{Level: 0, Key: key(bitWords(1), "#")},
		{Level: 0, Key: key(bitWords(1), strings.TrimSuffix(strings.Repeat("*.", len(destWords)), "."))},
		{Level: 0, Key: key(bitWords(1), "#."+dest)},
		{Level: 0, Key: key(bitWords(1), "*."+dest)},
		{Level: 0, Key: key(bitWords(1), "x."+dest)},
		{Level: 0, Key: key(bitWords(1), strings.Join(destWords[:len(destWords)-1], "."))},
		{Level: 0, Key: key(bitWords(1), "")},
		{Level: 0, Key: strings.Join(bitWords(1), ".")},
		{Level: -1, Key: dest},
		{Level: -1, Key: ""},
	}
	for i := range ms {
		ms[i].Body = fmt.Sprintf("m%02d", i)
	}
	return ms
}

// placement is where each foreign message ended up: "refused" at publish,
// the role of the queue it is in, or "nowhere" (held by a level's
// dead-lettering, which neither transport shows).
func placement(t *testing.T, tr transport.Transport, ms []foreignMessage, routed []bool, queues map[string]string) map[string]string {
	t.Helper()
	where := map[string]string{}
	for i, m := range ms {
		where[m.Body] = "nowhere"
		if !routed[i] {
			where[m.Body] = "refused"
		}
	}
	for role, q := range queues {
		for {
			d, ok, err := tr.Get(context.Background(), q)
			if err != nil {
				t.Fatalf("Get %s: %v", q, err)
			}
			if !ok {
				break
			}
			if w := where[string(d.Body)]; w != "nowhere" {
				t.Errorf("%s: in %s, and %s", d.Body, role, w)
			}
			where[string(d.Body)] = role
			_ = d.Ack()
		}
	}
	return where
}

// TestRabbitDelayForeignClient: python3-pika, a client that is not
// acemq, publishes straight to the levels of a private copy of the layout
// with hostile routing keys; each message ends up where the memory
// transport puts the same message (refused at publish, held by a level,
// waiting on level 27, in the undeliverable queue, in the one queue its
// key names), and never in another queue. Where they differ, the memory
// transport is wrong.
func TestRabbitDelayForeignClient(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	prefix := r.queue() + ".delay"
	rename := privateDelays(t, r.tr, prefix)
	dest := r.queue() + ".dest"
	pad := func(s string) string { return s + strings.Repeat("l", delay.MaxQueueName-len(s)) }
	long, missing := pad(r.queue()+".long."), pad(r.queue()+".missing.")
	ms := hostileKeys(dest, long, missing)
	for i := range ms {
		ms[i].Ex = rename(delay.Deliver)
		if ms[i].Level >= 0 {
			ms[i].Ex = rename(delay.Level(ms[i].Level))
		}
		if len(ms[i].Key) > 255 {
			t.Fatalf("%s: a key of %d bytes", ms[i].Body, len(ms[i].Key))
		}
	}
	queues := map[string]string{"dest": dest, "long": long, "undeliverable": rename(delay.Undeliverable)}
	for k := range delay.Levels {
		queues[fmt.Sprintf("level %02d", k)] = rename(delay.Level(k))
	}
	setUp := func(tr transport.Transport) {
		var top transport.Topology
		for _, q := range []string{dest, long} {
			b, err := delay.Bind(q)
			if err != nil {
				t.Fatal(err)
			}
			b.Exchange = rename(b.Exchange)
			top.Queues = append(top.Queues, transport.Queue{Name: q, Durable: true})
			top.Bindings = append(top.Bindings, b)
		}
		if err := tr.Declare(context.Background(), top); err != nil {
			t.Fatal(err)
		}
	}
	setUp(r.tr)
	t.Cleanup(func() {
		for _, q := range []string{dest, long} {
			_, _ = r.admin.QueueDelete(q, false, false, false)
		}
	})

	// The memory transport, the same messages by its own publish.
	b := memory.New()
	t.Cleanup(func() { _ = b.Close() })
	mc := b.Connect()
	privateDelays(t, mc, prefix)
	setUp(mc)
	memRouted := make([]bool, len(ms))
	for i, m := range ms {
		p := transport.Publishing{Exchange: m.Ex, RoutingKey: m.Key, Mandatory: true, Body: []byte(m.Body)}
		p.DeliveryMode = 2
		c, err := mc.Publish(context.Background(), p)
		if err != nil {
			t.Fatalf("memory: %s: %v", m.Body, err)
		}
		memRouted[i] = c.Routed
	}
	b.Clock().Advance(time.Second) // everything below level 27 is due within 250 ms
	memCounts := map[string]int{}
	for role, q := range queues {
		memCounts[role] = b.Depth(q)
	}
	want := placement(t, mc, ms, memRouted, queues)

	// RabbitMQ, by pika.
	in, err := json.Marshal(ms)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/python3", "-c", foreignPublisher, r.url)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("python3-pika: %v\n%s", err, stderr)
	}
	var routed []bool
	if err := json.Unmarshal(out, &routed); err != nil || len(routed) != len(ms) {
		t.Fatalf("python3-pika said %q (%v)", out, err)
	}
	counts := func() map[string]int {
		n := map[string]int{}
		for role, q := range queues {
			info, err := r.tr.Inspect(context.Background(), q)
			if err != nil {
				t.Fatalf("Inspect %s: %v", q, err)
			}
			n[role] = info.Messages
		}
		return n
	}
	polltest.Until(polltest.Generous, func() bool { return fmt.Sprint(counts()) == fmt.Sprint(memCounts) })
	time.Sleep(250 * time.Millisecond) // and nothing more comes
	got := placement(t, r.tr, ms, routed, queues)

	for i, m := range ms {
		t.Logf("%s to %s, key %.60q…: %s", m.Body, strings.TrimPrefix(m.Ex, prefix), m.Key, got[m.Body])
		if got[m.Body] != want[m.Body] {
			t.Errorf("%s (key %q to %s): RabbitMQ %s, the memory transport %s", m.Body, m.Key, m.Ex, got[m.Body], want[m.Body])
		}
		if routed[i] != memRouted[i] {
			t.Errorf("%s: routed %v on RabbitMQ, %v on the memory transport", m.Body, routed[i], memRouted[i])
		}
	}
	// Not vacuous: every kind of end is among them.
	ends := map[string]bool{}
	for _, w := range got {
		ends[w] = true
	}
	for _, w := range []string{"refused", "nowhere", "dest", "long", "undeliverable", "level 27"} {
		if !ends[w] {
			t.Errorf("no message ended %s", w)
		}
	}
}
