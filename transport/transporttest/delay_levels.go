package transporttest

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
)

// The delay cases that need a layout of their own join the suite here.
func init() {
	cases = append(cases,
		testCase{"DelayLevels", testDelayLevels},
		testCase{"DelayForeignKeys", testDelayForeignKeys},
		testCase{"DelayXDeathOrder", testDelayXDeathOrder},
		testCase{"TopicEmptyRoutingKey", testTopicEmptyKey},
	)
}

// layout is delay.Topology under names of one case's own: the same
// exchanges, queues, arguments and bindings, with delay.Prefix replaced.
// The real layout is one per vhost, and on RabbitMQ the vhost is shared by
// every test running at the same time, servers among them that take
// whatever waits in the undeliverable queue: a case that counts what waits
// on a level, or leaves a message there for days, does it on its own copy,
// whose queues it deletes when it ends.
type layout struct{ prefix string }

// rename maps a name of the real layout to this one's.
func (l layout) rename(s string) string {
	if rest, ok := strings.CutPrefix(s, delay.Prefix); ok {
		return l.prefix + rest
	}
	return s
}

func (l layout) level(k int) string    { return l.rename(delay.Level(k)) }
func (l layout) deliver() string       { return l.rename(delay.Deliver) }
func (l layout) undeliverable() string { return l.rename(delay.Undeliverable) }

// renamed is top with every name of the layout, and every argument naming
// one, renamed.
func (l layout) renamed(top transport.Topology) transport.Topology {
	args := func(m map[string]any) map[string]any {
		if m == nil {
			return nil
		}
		out := make(map[string]any, len(m))
		for k, v := range m {
			if s, ok := v.(string); ok {
				v = l.rename(s)
			}
			out[k] = v
		}
		return out
	}
	var t transport.Topology
	for _, x := range top.Exchanges {
		t.Exchanges = append(t.Exchanges, transport.Exchange{Name: l.rename(x.Name), Kind: x.Kind, Durable: x.Durable, Args: args(x.Args)})
	}
	for _, q := range top.Queues {
		t.Queues = append(t.Queues, transport.Queue{Name: l.rename(q.Name), Durable: q.Durable, Args: args(q.Args)})
	}
	for _, b := range top.Bindings {
		t.Bindings = append(t.Bindings, transport.Binding{Queue: l.rename(b.Queue), Exchange: l.rename(b.Exchange), Key: b.Key})
	}
	for _, b := range top.ExchangeBindings {
		t.ExchangeBindings = append(t.ExchangeBindings,
			transport.ExchangeBinding{Destination: l.rename(b.Destination), Source: l.rename(b.Source), Key: b.Key})
	}
	return t
}

// layout declares a layout of this case's own and deletes its queues (and
// whatever waits on them) when the case ends. Its exchanges stay, as every
// case's do, until the vhost goes.
func (e *env) layout(c transport.Transport) layout {
	e.t.Helper()
	l := layout{prefix: e.name("delay")}
	top := l.renamed(delay.Topology())
	if s := fmt.Sprint(top); strings.Contains(s, delay.Prefix) {
		e.t.Fatalf("the private layout still names the real one: %s", s)
	}
	del := e.deleter(c)
	e.declare(c, top)
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		for _, q := range top.Queues {
			if err := del.DeleteQueue(ctx, q.Name); err != nil {
				e.t.Errorf("delete %s: %v", q.Name, err)
			}
		}
	})
	return l
}

// bind is delay.Bind(queue) on this layout's deliver exchange.
func (e *env) bindTo(l layout, queue string) transport.Binding {
	e.t.Helper()
	b, err := delay.Bind(queue)
	if err != nil {
		e.t.Fatal(err)
	}
	b.Exchange = l.rename(b.Exchange)
	return b
}

// virtualClock returns c's clock when it is virtual: it stands still until
// the harness advances it, as the memory transport's does, so a case can
// let a year pass and see a message arrive to the nanosecond. A real
// broker, or a memory broker on the wall clock, waits in real time.
func virtualClock(c transport.Transport) (transport.Clock, bool) {
	cc, ok := c.(transport.Clocked)
	if !ok {
		return nil, false
	}
	clk := cc.Clock()
	t0 := clk.Now()
	time.Sleep(time.Millisecond)
	return clk, clk.Now().Equal(t0)
}

// words spells n units in the 28 bit-words of the wire contract, most
// significant first, independently of package delay.
func words(n uint64) []string {
	w := make([]string, delay.Levels)
	for k := range delay.Levels {
		w[delay.Levels-1-k] = fmt.Sprint(n >> k & 1)
	}
	return w
}

// spell is the routing key of n units to queue.
func spell(n uint64, queue string) string { return strings.Join(words(n), ".") + "." + queue }

// topLevel is the level a delay of n units is published to: that of its
// highest set bit, -1 for none (the deliver exchange).
func topLevel(n uint64) int { return bits.Len64(n) - 1 }

// levelCase is a delay and the units it must take, rounded up.
type levelCase struct {
	name string
	d    time.Duration
	n    uint64
}

// levelCases are the boundaries: of the unit, of the levels (2^k − 1, 2^k
// and 2^k + 1 units, where a message moves up a level), of the powers of
// two seconds that another family member's layout (one level per second)
// would have, and of the maximum.
func levelCases() []levelCase {
	u := delay.Unit
	cs := []levelCase{
		{"0", 0, 0},
		{"-1ns", -1, 0},
		{"-1s", -time.Second, 0},
		{"1ns", 1, 1},
		{"125ms", u, 1},
		{"126ms", u + time.Millisecond, 2},
		{"1s", time.Second, 8},
		{"(2^25-1)s", (1<<25 - 1) * time.Second, 8 * (1<<25 - 1)},
		{"max-1ns", delay.Max - 1, 1<<delay.Levels - 1},
		{"max", delay.Max, 1<<delay.Levels - 1},
	}
	for _, k := range []int{1, 2, 3, 5, 8, 12, 17, 21, 24} {
		s := uint64(1) << k
		sec := func(s uint64) time.Duration { return time.Duration(s) * time.Second }
		cs = append(cs,
			levelCase{fmt.Sprintf("(2^%d-1)s", k), sec(s - 1), 8 * (s - 1)},
			levelCase{fmt.Sprintf("2^%ds", k), sec(s), 8 * s},
			levelCase{fmt.Sprintf("(2^%d+1)s", k), sec(s + 1), 8 * (s + 1)})
	}
	for _, k := range []int{1, 2, 4, 6, 11, 16, 22, 27} {
		n := uint64(1) << k
		cs = append(cs,
			levelCase{fmt.Sprintf("2^%d-1 units", k), time.Duration(n-1) * u, n - 1},
			levelCase{fmt.Sprintf("2^%d units", k), time.Duration(n) * u, n},
			levelCase{fmt.Sprintf("2^%d+1 units", k), time.Duration(n+1) * u, n + 1})
	}
	return cs
}

// realTimeLimit is the longest delay a case waits for on a real clock;
// longer ones are checked where they wait, not where they arrive.
const realTimeLimit = 3 * time.Second

// testDelayLevels: every boundary routes as the wire contract spells it,
// is published to the level of its highest bit and sits there, one past
// the maximum is refused before anything is published, and each message
// arrives when due, with the x-death of the levels it waited on. On a
// virtual clock every one arrives exactly when due (nothing a nanosecond
// before, everything at it), the maximum too; on a real broker those due
// within realTimeLimit arrive never early and late by less than lateBy,
// and the others are seen waiting on their level, then deleted with the
// case's own layout.
func testDelayLevels(t *testing.T, e *env) {
	c := e.conn()
	l := e.layout(c)
	clk, virtual := virtualClock(c)

	cs := levelCases()
	queues := make([]string, len(cs))
	routes := make([]delay.Route, len(cs))
	var dests transport.Topology
	for i, tc := range cs {
		q := e.name(fmt.Sprintf("q%02d", i))
		queues[i] = q
		r, err := delay.RouteTo(q, tc.d)
		if err != nil {
			t.Fatalf("%s: RouteTo: %v", tc.name, err)
		}
		wantX := delay.Deliver
		if k := topLevel(tc.n); k >= 0 {
			wantX = delay.Level(k)
		}
		if r.Exchange != wantX || r.Key != spell(tc.n, q) || r.Wait != time.Duration(tc.n)*delay.Unit {
			t.Errorf("%s: RouteTo = %s %q after %v, want %s %q after %v",
				tc.name, r.Exchange, r.Key, r.Wait, wantX, spell(tc.n, q), time.Duration(tc.n)*delay.Unit)
		}
		if tc.d > 0 && (r.Wait < tc.d || r.Wait-tc.d >= delay.Unit) {
			t.Errorf("%s: waits %v: early, or late by a unit or more", tc.name, r.Wait)
		}
		routes[i] = r
		dests.Queues = append(dests.Queues, transport.Queue{Name: q, Durable: true})
		dests.Bindings = append(dests.Bindings, e.bindTo(l, q))
	}
	e.declare(c, dests)

	var vstart time.Time
	var w *watch
	if virtual {
		vstart = clk.Now()
	} else {
		w = e.watch(c, queues, routes)
	}
	start := time.Now()
	published := make([]time.Time, len(cs))
	want := make([]int, delay.Levels)
	for i, tc := range cs {
		p := transport.Publishing{Exchange: l.rename(routes[i].Exchange), RoutingKey: routes[i].Key, Mandatory: true, Body: []byte(tc.name)}
		p.DeliveryMode = 2
		published[i] = time.Now()
		if !e.publish(c, p).Routed {
			t.Fatalf("%s: not routed", tc.name)
		}
		if k := topLevel(tc.n); k >= 0 {
			want[k]++
			e.onLevel(c, l, k, want[k], start, virtual, tc.name)
		}
	}
	for k := range delay.Levels {
		e.onLevel(c, l, k, want[k], start, virtual, "")
	}

	// One past the maximum is refused, and nothing was published for it:
	// the levels hold what they held.
	for _, d := range []time.Duration{delay.Max + 1, delay.Max + delay.Unit, 1 << 25 * time.Second, 1<<63 - 1} {
		r, err := delay.RouteTo(e.name("never"), d)
		if !errors.Is(err, delay.ErrTooLong) || r != (delay.Route{}) {
			t.Errorf("RouteTo after %v = %+v, %v; want ErrTooLong", d, r, err)
		}
	}
	for k := range delay.Levels {
		e.onLevel(c, l, k, want[k], start, virtual, "")
	}

	if virtual {
		e.arriveOnClock(c, l, clk, vstart, cs, queues, routes)
	} else {
		e.arriveInTime(c, l, w, cs, queues, routes, published)
	}
}

// onLevel checks that level k holds n ready messages where that can be
// known: on a virtual clock always; on a real one only while no message
// can have left the level or come down to it, less than the level's wait
// after the first publish (a higher level waits longer).
func (e *env) onLevel(c transport.Transport, l layout, k, n int, since time.Time, virtual bool, after string) {
	e.t.Helper()
	info, err := c.Inspect(e.ctx(), l.level(k))
	if err != nil {
		e.t.Fatalf("Inspect level %d: %v", k, err)
	}
	if !virtual && time.Since(since) >= delay.LevelWait(k) {
		return
	}
	if info.Messages != n {
		if after != "" {
			e.t.Errorf("after publishing %s: level %d holds %d, want %d", after, k, info.Messages, n)
		} else {
			e.t.Errorf("level %d holds %d, want %d", k, info.Messages, n)
		}
	}
}

// arriveOnClock advances the virtual clock through every due time: a
// nanosecond before it, nothing due then or later has arrived; at it,
// what is due has, once.
func (e *env) arriveOnClock(c transport.Transport, l layout, clk transport.Clock, start time.Time, cs []levelCase, queues []string, routes []delay.Route) {
	t := e.t
	depth := func(q string) int {
		info, err := c.Inspect(e.ctx(), q)
		if err != nil {
			t.Fatalf("Inspect %s: %v", q, err)
		}
		return info.Messages
	}
	var due []time.Duration
	for _, r := range routes {
		due = append(due, r.Wait)
	}
	slices.Sort(due)
	for _, w := range slices.Compact(due) {
		if passed := clk.Now().Sub(start); w > passed {
			e.advance(w - passed - time.Nanosecond)
			for i, r := range routes {
				if r.Wait >= w {
					if n := depth(queues[i]); n != 0 {
						t.Errorf("%s: arrived a nanosecond before %v, due after %v", cs[i].name, w, r.Wait)
					}
				}
			}
			e.advance(time.Nanosecond)
		}
		if got := clk.Now().Sub(start); got != w {
			t.Fatalf("the clock reads %v after the first publish, want %v", got, w)
		}
		for i, r := range routes {
			if r.Wait == w {
				if n := depth(queues[i]); n != 1 {
					t.Errorf("%s: %d messages when due (%v), want 1", cs[i].name, n, w)
				}
			}
		}
	}
	for k := range delay.Levels {
		if n := depth(l.level(k)); n != 0 {
			t.Errorf("level %d holds %d after everything was due", k, n)
		}
	}
	for i := range cs {
		d, ok, err := c.Get(e.ctx(), queues[i])
		if err != nil || !ok {
			t.Fatalf("%s: Get: %v, %v", cs[i].name, ok, err)
		}
		e.arrived(l, d, cs[i], routes[i])
		e.ack(d)
	}
}

// watch is the real-time half of testDelayLevels: the queues of the
// messages due within realTimeLimit, consumed before anything is
// published, and when each message came.
type watch struct {
	cases []int // the cases watched, by index
	subs  []transport.Subscription
	got   chan arrival
}

// arrival is a message seen arriving in real time.
type arrival struct {
	i  int // its case
	d  transport.Delivery
	at time.Time
	ok bool // false: nothing came
}

func (e *env) watch(c transport.Transport, queues []string, routes []delay.Route) *watch {
	w := &watch{}
	for i, r := range routes {
		if r.Wait <= realTimeLimit {
			w.cases = append(w.cases, i)
			w.subs = append(w.subs, e.consume(c, queues[i], 2))
		}
	}
	w.got = make(chan arrival, len(w.cases))
	for j, i := range w.cases {
		s := w.subs[j]
		go func() {
			select {
			case d, ok := <-s.Deliveries():
				w.got <- arrival{i: i, d: d, at: time.Now(), ok: ok}
			case <-time.After(realTimeLimit + wait):
				w.got <- arrival{i: i}
			}
		}()
	}
	return w
}

// arriveInTime waits for the watched messages: each arrives no earlier
// than due (counted from just before its publish) and late by less than
// lateBy, once. Those due later must not have arrived.
func (e *env) arriveInTime(c transport.Transport, l layout, w *watch, cs []levelCase, queues []string, routes []delay.Route, published []time.Time) {
	t := e.t
	for range w.cases {
		a := <-w.got
		tc, r := cs[a.i], routes[a.i]
		if !a.ok {
			t.Errorf("%s: nothing arrived within %v of its due time", tc.name, wait)
			continue
		}
		late := a.at.Sub(published[a.i].Add(r.Wait))
		t.Logf("%s: due after %v, arrived %v after due", tc.name, r.Wait, late)
		switch {
		case late < -early(r.Wait):
			t.Errorf("%s: arrived %v early", tc.name, -late)
		case late > lateBy:
			t.Errorf("%s: arrived %v late, over %v", tc.name, late, lateBy)
		}
		e.arrived(l, a.d, tc, r)
		e.ack(a.d)
	}
	time.Sleep(quiet)
	for j, s := range w.subs {
		select {
		case d := <-s.Deliveries():
			t.Errorf("%s: arrived twice (%q)", cs[w.cases[j]].name, d.Body)
		default:
		}
	}
	for i, r := range routes {
		if r.Wait <= realTimeLimit {
			continue
		}
		if info, err := c.Inspect(e.ctx(), queues[i]); err != nil || info.Messages != 0 {
			t.Errorf("%s: due after %v, found %d in its queue (%v)", cs[i].name, r.Wait, info.Messages, err)
		}
	}
}

// arrived checks a due message as the wire contract describes it: the
// routing key it was published with; as its exchange the dead-letter
// exchange of the last level it waited on (the deliver exchange for level
// 0 or no wait); and an x-death entry, reason expired, for each level it
// waited on, exactly the levels of its set bits, the newest (lowest)
// first. (The order of the others is RabbitMQ's own: testDelayXDeathOrder.)
func (e *env) arrived(l layout, d transport.Delivery, tc levelCase, r delay.Route) {
	t := e.t
	t.Helper()
	if string(d.Body) != tc.name {
		t.Errorf("%s: body %q", tc.name, d.Body)
	}
	if d.RoutingKey != r.Key {
		t.Errorf("%s: routing key %q, want %q", tc.name, d.RoutingKey, r.Key)
	}
	wantX := l.deliver()
	if tc.n != 0 {
		if low := bits.TrailingZeros64(tc.n); low > 0 {
			wantX = l.level(low - 1)
		}
	}
	if d.Exchange != wantX {
		t.Errorf("%s: arrived from exchange %q, want %q", tc.name, d.Exchange, wantX)
	}
	var want, got []string
	for k := range delay.Levels {
		if tc.n>>k&1 == 1 {
			want = append(want, l.level(k)+" expired 1")
		}
	}
	deaths, _ := d.Headers["x-death"].([]any)
	for _, x := range deaths {
		m, _ := x.(map[string]any)
		n, _ := asInt(m["count"])
		got = append(got, fmt.Sprintf("%v %v %d", m["queue"], m["reason"], n))
	}
	if len(got) > 0 && len(want) > 0 && got[0] != want[0] {
		t.Errorf("%s: newest x-death %q, want %q", tc.name, got[0], want[0])
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: x-death %q, want %q", tc.name, got, want)
	}
}
