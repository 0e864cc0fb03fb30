package transporttest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

// Where a foreign message ends up, in testDelayForeignKeys.
const (
	toNowhere      = ""              // refused at publish, or held by a level's dead-lettering
	toDest         = "dest"          // the queue its key names
	toLong         = "long"          // the queue of 199 bytes its 255-byte key names
	toUndelivered  = "undeliverable" // the layout's undeliverable queue
	toTopLevel     = "level 27"      // waiting on level 27, for 194 days
	deliverLevel   = -1              // foreignKey.level of the deliver exchange
	foreignTopWait = 27
)

// foreignKey is a message another client publishes straight to the
// layout, with a routing key acemq would never write.
type foreignKey struct {
	name   string
	level  int // the level exchange it is published to; deliverLevel for the deliver exchange
	key    string
	routed bool   // a mandatory publish reaches a queue
	to     string // where it ends up
}

// with is words(n) with word w (0 is bit 27's, 27 bit 0's) replaced.
func with(n uint64, w int, s string) []string {
	ws := words(n)
	ws[w] = s
	return ws
}

func join(ws []string, dest string) string { return strings.Join(ws, ".") + "." + dest }

// foreignKeys are the keys of testDelayForeignKeys, to dest (bound),
// long (a bound queue of the longest name a key can carry) and missing
// (a queue of that length that does not exist).
func foreignKeys(dest, long, missing string) []foreignKey {
	destWords := strings.Split(dest, ".")
	stars := strings.TrimSuffix(strings.Repeat("*.", len(destWords)), ".")
	return []foreignKey{
		// A level exchange reads only its own word: none, or one that is
		// neither 0 nor 1, matches no binding, and the publish is refused.
		{"too few words", 0, "1." + dest, false, toNowhere},
		{"empty key", 0, "", false, toNowhere},
		{"2 at the published level", 3, join(with(8, 24, "2"), dest), false, toNowhere},
		{"x at bit 27, to level 27", 27, join(with(1<<27, 0, "x"), dest), false, toNowhere},
		// One bit-word too few: level 0 reads the destination's first word.
		{"27 bit-words", 0, join(words(1)[1:], dest), false, toNowhere},
		// Level 27 reads the first word only: "1.junk" waits there, and
		// level 26, which reads the second, will route it nowhere.
		{"too few words, to level 27", 27, "1.junk", true, toTopLevel},
		// A word that is neither 0 nor 1 below the published level: the
		// message waits, and the level below routes it nowhere when it is
		// dead-lettered. Under at-least-once dead-lettering the level keeps
		// it (not ready, offered again every few minutes), on RabbitMQ as
		// on the memory transport.
		{"x below the published level", 1, join(with(3, 27, "x"), dest), true, toNowhere},
		// Words above the published level are read by no one.
		{"x above the published level", 0, join(with(1, 0, "x"), dest), true, toDest},
		{"published above its highest bit", 5, join(words(1), dest), true, toDest},
		{"any 28 words, to deliver", deliverLevel, join(strings.Split(strings.Repeat("w.", 27)+"w", "."), dest), true, toDest},
		// The deliver exchange takes exactly 28 words and then a bound
		// queue's: anything else goes to the undeliverable queue, never to
		// a queue whose name it resembles.
		{"a key of 255 bytes, to its queue", 0, join(words(1), long), true, toLong},
		{"a key of 255 bytes, to no queue", 0, join(words(1), missing), true, toUndelivered},
		{"destination #", 0, join(words(1), "#"), true, toUndelivered},
		{"destination of * words", 0, join(words(1), stars), true, toUndelivered},
		{"a # word before the destination", 0, join(words(1), "#."+dest), true, toUndelivered},
		{"a * word before the destination", 0, join(words(1), "*."+dest), true, toUndelivered},
		{"a longer name ending in the destination's", 0, join(words(1), "x."+dest), true, toUndelivered},
		{"the destination's first words", 0, join(words(1), strings.Join(destWords[:len(destWords)-1], ".")), true, toUndelivered},
		{"empty destination", 0, join(words(1), ""), true, toUndelivered},
		{"no destination", 0, strings.Join(words(1), "."), true, toUndelivered},
		{"no bit-words, to deliver", deliverLevel, dest, true, toUndelivered},
		{"empty key, to deliver", deliverLevel, "", true, toUndelivered},
	}
}

// testDelayForeignKeys: messages another client publishes to the layout
// with routing keys acemq never writes (too few words, words neither 0
// nor 1, a key of 255 bytes, wildcard words as a destination) end up
// where RabbitMQ 3.10.8 puts them, checked there with these very keys:
// refused at publish, held by a level, in the undeliverable queue, or in
// the one queue their key names; never in another queue.
func testDelayForeignKeys(t *testing.T, e *env) {
	c := e.conn()
	l := e.layout(c)
	_, virtual := virtualClock(c)
	dest := e.name("dest")
	pad := func(s string) string { return s + strings.Repeat("l", delay.MaxQueueName-len(s)) }
	long, missing := pad(e.name("long.")), pad(e.name("missing."))
	e.declare(c, transport.Topology{
		Queues:   []transport.Queue{{Name: dest, Durable: true}, {Name: long, Durable: true}},
		Bindings: []transport.Binding{e.bindTo(l, dest), e.bindTo(l, long)},
	})
	keys := foreignKeys(dest, long, missing)
	want := map[string][]string{}
	for _, k := range keys {
		if len(k.key) > 255 {
			t.Fatalf("%s: a key of %d bytes", k.name, len(k.key))
		}
		x := l.deliver()
		if k.level != deliverLevel {
			x = l.level(k.level)
		}
		p := transport.Publishing{Exchange: x, RoutingKey: k.key, Mandatory: true, Body: []byte(k.name)}
		p.DeliveryMode = 2
		if got := e.publish(c, p).Routed; got != k.routed {
			t.Errorf("%s: routed %v, want %v", k.name, got, k.routed)
		}
		want[k.to] = append(want[k.to], k.name)
	}
	queues := map[string]string{toDest: dest, toLong: long, toUndelivered: l.undeliverable(), toTopLevel: l.level(foreignTopWait)}
	count := func() map[string]int {
		n := map[string]int{}
		for to, q := range queues {
			info, err := c.Inspect(e.ctx(), q)
			if err != nil {
				t.Fatalf("Inspect %s: %v", q, err)
			}
			n[to] = info.Messages
		}
		for k := range foreignTopWait {
			info, err := c.Inspect(e.ctx(), l.level(k))
			if err != nil {
				t.Fatalf("Inspect %s: %v", l.level(k), err)
			}
			n[fmt.Sprintf("level %d", k)] += info.Messages
		}
		return n
	}
	wantCount := map[string]int{}
	for to := range queues {
		wantCount[to] = len(want[to])
	}
	for k := range foreignTopWait {
		wantCount[fmt.Sprintf("level %d", k)] = 0
	}
	// Everything below level 27 is due within 250 ms.
	if virtual {
		e.advance(time.Second)
	} else {
		e.eventually(func() (bool, string) {
			n := count()
			return fmt.Sprint(n) == fmt.Sprint(wantCount), fmt.Sprintf("placed %v, want %v", n, wantCount)
		})
		time.Sleep(quiet)
	}
	if n := count(); fmt.Sprint(n) != fmt.Sprint(wantCount) {
		t.Errorf("placed %v, want %v", n, wantCount)
	}
	for to, q := range queues {
		var got []string
		for {
			d, ok, err := c.Get(e.ctx(), q)
			if err != nil {
				t.Fatalf("Get %s: %v", q, err)
			}
			if !ok {
				break
			}
			got = append(got, string(d.Body))
			e.ack(d)
		}
		slices.Sort(got)
		slices.Sort(want[to])
		if !slices.Equal(got, want[to]) {
			t.Errorf("in %s: %q, want %q", to, got, want[to])
		}
	}
}

// testTopicEmptyKey: RabbitMQ 3.10.8 splits an empty routing key into no
// words at all, so a topic binding "*" (exactly one word) does not take
// it, nor do "*.#" and "#.*"; "#" and the empty binding do. A key of one
// dot is two empty words. (A foreign client's empty key to a level
// exchange meets no binding either way; this is the topic exchange
// itself.)
func testTopicEmptyKey(t *testing.T, e *env) {
	c := e.conn()
	x := e.name("x")
	patterns := []string{"*", "#", "", "*.#", "#.*", "*.*", "a.*", "a.#"}
	top := transport.Topology{Exchanges: []transport.Exchange{{Name: x, Kind: "topic", Durable: true}}}
	queue := map[string]string{}
	for i, p := range patterns {
		q := e.name(fmt.Sprintf("q%d", i))
		queue[p] = q
		top.Queues = append(top.Queues, transport.Queue{Name: q, Durable: true})
		top.Bindings = append(top.Bindings, transport.Binding{Queue: q, Exchange: x, Key: p})
	}
	e.declare(c, top)
	// What RabbitMQ 3.10.8 routes each key to, checked with pika.
	want := map[string][]string{
		"":    {"#", ""},
		".":   {"#", "*.#", "#.*", "*.*"},
		"a":   {"*", "#", "*.#", "#.*", "a.#"},
		"a.":  {"#", "*.#", "#.*", "*.*", "a.*", "a.#"},
		"a.b": {"#", "*.#", "#.*", "*.*", "a.*", "a.#"},
	}
	for _, key := range []string{"", ".", "a", "a.", "a.b"} {
		e.publish(c, transport.Publishing{Exchange: x, RoutingKey: key, Mandatory: true, Body: []byte(key)})
		var got []string
		for _, p := range patterns {
			for {
				d, ok, err := c.Get(e.ctx(), queue[p])
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				if !ok {
					break
				}
				got = append(got, p)
				e.ack(d)
			}
		}
		if !slices.Equal(got, want[key]) {
			t.Errorf("key %q reached the bindings %q, want %q", key, got, want[key])
		}
	}
}
