package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// withDelays declares the delay queues on b and binds each of queues
// (declared first) to them, as a server does at start-up.
func withDelays(t *testing.T, b *memory.Broker, queues ...string) {
	t.Helper()
	conn := b.Connect()
	defer conn.Close()
	ctx := context.Background()
	if err := conn.Declare(ctx, delay.Topology()); err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		bd, err := delay.Bind(q)
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Declare(ctx, acemq.Topology(q, retry.None(), nil)); err != nil {
			t.Fatal(err)
		}
		if err := conn.Declare(ctx, transport.Topology{Bindings: []transport.Binding{bd}}); err != nil {
			t.Fatal(err)
		}
	}
}

// scheduleOn publishes a message for queue due d after now, as the
// Publisher does (delay.Aim).
func scheduleOn(t *testing.T, tr transport.Transport, now time.Time, queue string, d time.Duration, id string) {
	t.Helper()
	p := transport.Publishing{Mandatory: true, Headers: map[string]any{acemq.HeaderID: id}, Body: []byte(id)}
	if _, err := delay.Aim(&p, queue, d, now); err != nil {
		t.Fatal(err)
	}
	if c, err := tr.Publish(context.Background(), p); err != nil || !c.Routed {
		t.Fatalf("publish %s for %s after %v: %+v %v", id, queue, d, c, err)
	}
}

// versionedConn is a memory connection that says it is a RabbitMQ of
// version, as the amqp transport does (transport.Versioned).
type versionedConn struct {
	*memory.Conn
	version string
}

func (c versionedConn) BrokerVersion(context.Context) (string, string, error) {
	return "RabbitMQ", c.version, nil
}

func asRabbitMQ(b *memory.Broker, version string) dialer {
	return func(context.Context, string) (transport.Transport, error) {
		return versionedConn{Conn: b.Connect(), version: version}, nil
	}
}

// delaysBroker holds, on the delay queues: for orders, 5s (level 05 and
// 03: n = 40) and 1h (n = 28800: level 14 first); for shipping, 250ms
// (level 01); and one due message for gone, a queue deleted while it
// waited, in the undeliverable queue.
func delaysBroker(t *testing.T) *memory.Broker {
	t.Helper()
	b := memory.New()
	withDelays(t, b, "orders", "shipping", "gone")
	conn := b.Connect()
	t.Cleanup(func() { conn.Close() })
	scheduleOn(t, conn, b.Clock().Now(), "gone", time.Second, "g-1")
	b.DeleteQueue("gone")
	b.Clock().Advance(2 * time.Second)
	now := b.Clock().Now()
	scheduleOn(t, conn, now, "orders", 5*time.Second, "o-1")
	scheduleOn(t, conn, now, "orders", time.Hour, "o-2")
	scheduleOn(t, conn, now, "shipping", 250*time.Millisecond, "s-1")
	return b
}

// levelCounts are the level queues' depths, and the delivery counts their
// messages carry.
func levelCounts(b *memory.Broker) (depths map[string]int, counts []any) {
	depths = map[string]int{}
	for k := range delay.Levels {
		for _, d := range b.Peek(delay.Level(k)) {
			depths[delay.Level(k)]++
			if c, ok := d.Headers["x-delivery-count"]; ok {
				counts = append(counts, c)
			}
		}
	}
	return depths, counts
}

func TestDelaysCommand(t *testing.T) {
	t.Parallel()
	b := delaysBroker(t)
	before, _ := levelCounts(b)
	mgmt := newMemoryManagement(t, b, "prod")
	code, out, errOut := cli(t, asRabbitMQ(b, "4.1.2"), "delays", "--url", "amqp://ops:hunter2@rabbit.internal/prod", "--management", mgmt.URL)
	if code != 0 || errOut != "" {
		t.Fatalf("status %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"acemq.delay.v1 on amqp://ops:xxxxx@rabbit.internal/prod (RabbitMQ 4.1.2): 3 waiting, 0 waiting to be dead-lettered, 1 undeliverable: 4 in all\n\n",
		"LEVEL  QUEUE                         WAIT          READY  UNACKED  DEAD-LETTERING\n",
		"00     acemq.delay.v1.00             125ms         0      0        0\n",
		"01     acemq.delay.v1.01             250ms         1      0        0\n",
		"05     acemq.delay.v1.05             4s            1      0        0\n",
		"14     acemq.delay.v1.14             34m8s         1      0        0\n",
		"27     acemq.delay.v1.27             194d4h20m16s  0      0        0\n",
		"-      acemq.delay.v1.undeliverable  -             1      0        0\n",
		"1 due, but their destination queue did not exist when they were due",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") || strings.Contains(out, "peeked") {
		t.Errorf("%s", out)
	}
	if after, counts := levelCounts(b); fmt.Sprint(after) != fmt.Sprint(before) || len(counts) != 0 {
		t.Errorf("levels %v, then %v, delivery counts %v: a look without --peek touched them", before, after, counts)
	}

	code, out, _ = cli(t, asRabbitMQ(b, "4.1.2"), "delays", "--url", "amqp://x", "--management", newMemoryManagement(t, b, "/").URL, "--json")
	var got delaysOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	if got.Waiting != 3 || len(got.Levels) != delay.Levels || got.Levels[5].Messages != 1 || got.Levels[27].WaitMS != 16777216000 ||
		got.Undeliverable.Messages != 1 || len(got.Missing) != 0 || got.Peek != nil || got.Broker != "RabbitMQ 4.1.2" || !got.Now.Equal(b.Clock().Now()) {
		t.Errorf("%+v", got)
	}
}

// TestDelaysPeek: on a broker that gives returned messages back in their
// place (RabbitMQ 4), --peek reads the levels and the undeliverable queue
// and gives everything back.
func TestDelaysPeek(t *testing.T) {
	t.Parallel()
	b := delaysBroker(t)
	code, out, errOut := cli(t, asRabbitMQ(b, "4.1.2"), "delays", "--url", "amqp://x", "--management", newMemoryManagement(t, b, "/").URL, "--peek", "10")
	if code != 0 || errOut != "" {
		t.Fatalf("status %d\n%s%s", code, out, errOut)
	}
	now := b.Clock().Now().UTC()
	at := func(d time.Duration) string { return now.Add(d).Format("2006-01-02 15:04:05.000Z") }
	for _, want := range []string{
		"LEVEL  QUEUE                         WAIT          READY  UNACKED  DEAD-LETTERING  PEEKED\n",
		"00     acemq.delay.v1.00             125ms         0      0        0               0\n",
		"05     acemq.delay.v1.05             4s            1      0        0               1\n",
		"-      acemq.delay.v1.undeliverable  -             1      0        0               1\n",
		"peeked 4 (at most 10 from each queue) and gave them all back: none consumed, but on a quorum queue each one's delivery count is now one higher\n",
		"waiting on the levels, by destination:\n" +
			"DESTINATION  MESSAGES  EARLIEST DUE                         LATEST DUE\n" +
			"shipping     1         " + at(250*time.Millisecond) + " (in 250ms)  " + at(250*time.Millisecond) + " (in 250ms)\n" +
			"orders       2         " + at(5*time.Second) + " (in 5s)     " + at(time.Hour) + " (in 1h)\n",
		"in acemq.delay.v1.undeliverable, by destination:\n" +
			"DESTINATION  MESSAGES  EARLIEST DUE                       LATEST DUE\n" +
			"gone         1         " + at(-time.Second) + " (1s ago)  " + at(-time.Second) + " (1s ago)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if b.Depth(delay.Level(5)) != 1 || b.Depth(delay.Level(14)) != 1 || b.Depth(delay.Level(1)) != 1 || b.Depth(delay.Undeliverable) != 1 {
		t.Errorf("not all given back:\n%s", out)
	}
	for k := range delay.Levels {
		if n := b.Unacked(delay.Level(k)); n != 0 {
			t.Errorf("%d held on level %d", n, k)
		}
	}

	code, out, _ = cli(t, asRabbitMQ(b, "4.1.2"), "delays", "--url", "amqp://x", "--management", newMemoryManagement(t, b, "/").URL, "--peek", "10", "--json")
	var got delaysOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Peek == nil {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	p := got.Peek
	if p.Peeked != 4 || !p.Levels || p.PerQueue != 10 || len(p.Waiting) != 2 || len(p.Undeliverable) != 1 || p.MaxDeliveryCount != 1 {
		t.Fatalf("%+v", p)
	}
	if w := p.Waiting[1]; w.Queue != "orders" || w.Messages != 2 || !w.Earliest.Equal(now.Add(5*time.Second)) || !w.Latest.Equal(now.Add(time.Hour)) {
		t.Errorf("orders: %+v", w)
	}
	if *got.Levels[5].Peeked != 1 || *got.Undeliverable.Peeked != 1 {
		t.Errorf("%+v %+v", got.Levels[5], got.Undeliverable)
	}
}

// TestDelaysPeekLimit: --peek N reads at most N of each queue, the first
// ones, all held until the last is read.
func TestDelaysPeekLimit(t *testing.T) {
	t.Parallel()
	b := memory.New()
	withDelays(t, b, "orders")
	conn := b.Connect()
	defer conn.Close()
	for i := range 5 {
		scheduleOn(t, conn, b.Clock().Now(), "orders", 2*time.Second, fmt.Sprint("o-", i)) // n = 16: level 04
	}
	code, out, _ := cli(t, asRabbitMQ(b, "4.0.5"), "delays", "--url", "amqp://x", "--management", newMemoryManagement(t, b, "/").URL, "--peek", "2", "--json")
	var got delaysOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Peek == nil {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	if got.Levels[4].Messages != 5 || *got.Levels[4].Peeked != 2 || got.Peek.Peeked != 2 || got.Peek.Waiting[0].Messages != 2 {
		t.Errorf("%+v %+v", got.Levels[4], got.Peek)
	}
	if b.Depth(delay.Level(4)) != 5 || b.Unacked(delay.Level(4)) != 0 {
		t.Errorf("level 04 holds %d, %d unacked", b.Depth(delay.Level(4)), b.Unacked(delay.Level(4)))
	}
}

// TestDelaysPeekLeavesLevelsWhereReturnsGoBack: RabbitMQ 3.10 to 3.13
// puts a quorum queue's returned messages at its back, where a level's
// would wait behind later ones and arrive late; so does the memory
// broker, which says no version. There --peek reads only the
// undeliverable queue and takes nothing from a level.
func TestDelaysPeekLeavesLevelsWhereReturnsGoBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		dial func(*memory.Broker) dialer
		says string
	}{
		{"3.10", func(b *memory.Broker) dialer { return asRabbitMQ(b, "3.10.8") }, "RabbitMQ 3.10.8 puts a quorum queue's returned messages at its back"},
		{"3.13", func(b *memory.Broker) dialer { return asRabbitMQ(b, "3.13.7") }, "RabbitMQ 3.13.7 puts"},
		{"unknown", func(b *memory.Broker) dialer {
			return func(context.Context, string) (transport.Transport, error) { return b.Connect(), nil }
		}, "the broker did not say which it is"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := delaysBroker(t)
			before, _ := levelCounts(b)
			code, out, _ := cli(t, c.dial(b), "delays", "--url", "amqp://x", "--management", newMemoryManagement(t, b, "/").URL, "--peek", "10")
			if code != 0 || !strings.Contains(out, "the level queues were not peeked: "+c.says) ||
				!strings.Contains(out, "05     acemq.delay.v1.05             4s            1      0        0               -\n") ||
				!strings.Contains(out, "gone         1") || strings.Contains(out, "waiting on the levels") {
				t.Errorf("status %d\n%s", code, out)
			}
			if after, counts := levelCounts(b); fmt.Sprint(after) != fmt.Sprint(before) || len(counts) != 0 {
				t.Errorf("levels %v, then %v, delivery counts %v", before, after, counts)
			}
		})
	}
	if levelPeekRefusal("RabbitMQ", "3.9.29") != "" || levelPeekRefusal("RabbitMQ", "4.0.0-rc.1") != "" ||
		levelPeekRefusal("RabbitMQ", "3.12.1") == "" || levelPeekRefusal("LavinMQ", "2.0") == "" || levelPeekRefusal("RabbitMQ", "x") == "" {
		t.Error("levelPeekRefusal: 3.9 (classic levels) and 4.x may be peeked, 3.10 to 3.13 and what is not RabbitMQ may not")
	}
}

// TestDelaysForeignMessages: what a foreign client put on a level is
// shown, not trusted: a destination with terminal escapes is quoted, a
// routing key that is not the layout's and a due time that is not a
// time are counted as such, and the JSON stays valid.
func TestDelaysForeignMessages(t *testing.T) {
	t.Parallel()
	b := memory.New()
	withDelays(t, b)
	conn := b.Connect()
	defer conn.Close()
	top := "1." + strings.Repeat("0.", delay.Levels-1) // level 27 alone
	for _, p := range []transport.Publishing{
		{Exchange: delay.Level(27), RoutingKey: top + "\x1b[2Jevil", Headers: map[string]any{delay.DueHeader: int64(1e18)}},
		{Exchange: delay.Level(27), RoutingKey: top + "spaced name", Headers: map[string]any{delay.DueHeader: "tomorrow"}},
		{Exchange: delay.Level(27), RoutingKey: "1.not-the-layout"},
	} {
		if c, err := conn.Publish(context.Background(), p); err != nil || !c.Routed {
			t.Fatal(c, err)
		}
	}
	code, out, _ := cli(t, asRabbitMQ(b, "4.1.2"), "delays", "--url", "amqp://x", "--management", newMemoryManagement(t, b, "/").URL, "--peek", "5")
	for _, want := range []string{
		"DESTINATION                MESSAGES                   EARLIEST DUE  LATEST DUE\n" +
			"(not a delay routing key)  1 (1 without x-acemq-due)  -             -\n" +
			`"\x1b[2Jevil"              1 (1 without x-acemq-due)  -             -` + "\n" +
			`"spaced name"              1 (1 without x-acemq-due)  -             -` + "\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status %d, missing %q in\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("an escape reached the terminal:\n%q", out)
	}
	code, out, _ = cli(t, asRabbitMQ(b, "4.1.2"), "delays", "--url", "amqp://x", "--management", newMemoryManagement(t, b, "/").URL, "--peek", "5", "--json")
	var got delaysOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Peek == nil || len(got.Peek.Waiting) != 3 {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	// Two peeks: the messages were delivered once before the second.
	if got.Peek.MaxDeliveryCount != 1 || b.Depth(delay.Level(27)) != 3 {
		t.Errorf("%+v, level 27 holds %d", got.Peek, b.Depth(delay.Level(27)))
	}
}

// TestDelaysMissing: a vhost without the delay queues, or with one
// deleted, is a failure that names the command that declares them.
func TestDelaysMissing(t *testing.T) {
	t.Parallel()
	nb, none := memoryBroker(t, "orders")
	code, out, errOut := cli(t, none, "delays", "--url", "amqp://x", "--management", newMemoryManagement(t, nb, "/").URL)
	if code != 1 || !strings.Contains(errOut, "the delay queues are not declared on this vhost; declare them with: acemq topology --delays --apply") ||
		!strings.Contains(out, "00     acemq.delay.v1.00             125ms         missing  -        -\n") {
		t.Errorf("status %d\n%s%s", code, out, errOut)
	}
	b := memory.New()
	withDelays(t, b)
	b.DeleteQueue(delay.Level(3))
	code, out, errOut = cli(t, asRabbitMQ(b, "4.1.2"), "delays", "--url", "amqp://x", "--management", newMemoryManagement(t, b, "/").URL, "--json")
	var got delaysOut
	if err := json.Unmarshal([]byte(out), &got); code != 1 || err != nil || strings.Join(got.Missing, " ") != delay.Level(3) || !got.Levels[3].Missing ||
		!strings.Contains(errOut, "1 of the delay queues do not exist (acemq.delay.v1.03 ...)") {
		t.Errorf("status %d %v\n%s%s", code, err, out, errOut)
	}
}

func TestDelaysConsumerWarning(t *testing.T) {
	t.Parallel()
	b := memory.New()
	withDelays(t, b)
	conn := b.Connect()
	defer conn.Close()
	if _, err := conn.Consume(context.Background(), delay.Level(2), transport.ConsumeOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, _ := cli(t, asRabbitMQ(b, "4.1.2"), "delays", "--url", "amqp://x", "--management", newMemoryManagement(t, b, "/").URL)
	if code != 0 || !strings.Contains(out, "warning: consumers on acemq.delay.v1.02 (1)") {
		t.Errorf("status %d\n%s", code, out)
	}
}

func TestSpanAndDue(t *testing.T) {
	t.Parallel()
	now := memory.Epoch
	for _, c := range []struct {
		got, want string
	}{
		{span(125 * time.Millisecond), "125ms"},
		{span(47 * time.Hour), "47h"},
		{span(48 * time.Hour), "2d"},
		{span(delay.LevelWait(27)), "194d4h20m16s"},
		{dueText(now, nil), "-"},
		{dueText(now, ptr(now.Add(200*time.Second))), now.Add(200*time.Second).UTC().Format("2006-01-02 15:04:05.000Z") + " (in 3m20s)"},
		{dueText(now, ptr(now.Add(-90*time.Second))), now.Add(-90*time.Second).UTC().Format("2006-01-02 15:04:05.000Z") + " (1m30s ago)"},
		{safeName("orders.created"), "orders.created"},
		{safeName("a\u202eb"), `"a\u202eb"`},
		{safeName("\xff"), `"\xff"`},
		{safeName(`"x"`), `"\"x\""`},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// heldBroker holds one message for orders on level 01 waiting to be
// dead-lettered: due to move down to level 00, whose exchange was
// deleted, so level 01 keeps it, neither ready nor unacked.
func heldBroker(t *testing.T) *memory.Broker {
	t.Helper()
	b := memory.New()
	withDelays(t, b, "orders")
	conn := b.Connect()
	t.Cleanup(func() { conn.Close() })
	scheduleOn(t, conn, b.Clock().Now(), "orders", 3*delay.Unit, "o-held") // level 01, then 00
	b.DeleteExchange(delay.Level(0))
	b.Clock().Advance(2 * delay.Unit)
	if b.DeadLettering(delay.Level(1)) != 1 || b.Depth(delay.Level(1)) != 0 {
		t.Fatalf("level 01: %d waiting to be dead-lettered, %d ready; want 1, 0", b.DeadLettering(delay.Level(1)), b.Depth(delay.Level(1)))
	}
	return b
}

// TestDelaysDeadLettering: a message a level holds to be dead-lettered is
// counted, from the management API, in its row, in the headline and in
// the total, and explained; the missing exchange that holds it up is
// named, with the command that declares it, and the exit status is 1.
func TestDelaysDeadLettering(t *testing.T) {
	t.Parallel()
	b := heldBroker(t)
	mgmt := newMemoryManagement(t, b, "prod")
	code, out, errOut := cli(t, asRabbitMQ(b, "3.10.8"), "delays", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", mgmt.URL)
	for _, want := range []string{
		"(RabbitMQ 3.10.8): 0 waiting, 1 waiting to be dead-lettered, 0 undeliverable: 1 in all\n\n",
		"01     acemq.delay.v1.01             250ms         0      0        1\n",
		"missing exchanges: acemq.delay.v1.00. A delayed publish to a missing level is refused",
		"1 waiting to be dead-lettered on acemq.delay.v1.01 (1): they are due to move down a level, but the level below is full (a max-length policy) or its exchange is missing",
		"RabbitMQ offers them again about every 3 minutes",
		"Never delete a delay queue that is not empty by every count.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if code != 1 || !strings.Contains(errOut, "1 of the delay exchanges do not exist (acemq.delay.v1.00 ...); declare them with: acemq topology --delays --apply") {
		t.Errorf("status %d, stderr %s", code, errOut)
	}

	code, out, _ = cli(t, asRabbitMQ(b, "3.10.8"), "delays", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", mgmt.URL, "--json")
	var got delaysOut
	if err := json.Unmarshal([]byte(out), &got); code != 1 || err != nil {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	if got.Waiting != 0 || got.DeadLettering == nil || *got.DeadLettering != 1 || got.Unacked == nil || *got.Unacked != 0 || got.Total != 1 || got.Unseen != "" ||
		*got.Levels[1].DeadLettering != 1 || strings.Join(got.MissingExchanges, " ") != delay.Level(0) || len(got.Missing) != 0 || got.Management != mgmt.URL {
		t.Errorf("%s", out)
	}
}

// TestDelaysCannotSeeDeadLettering: without the management API, delays
// says plainly that what waits to be dead-lettered cannot be seen, shows
// those counts as unknown (not 0) and calls its total a floor; a level the
// API has not sampled yet says so.
func TestDelaysCannotSeeDeadLettering(t *testing.T) {
	t.Parallel()
	b := heldBroker(t)
	addr := closedPort(t)
	code, out, _ := cli(t, asRabbitMQ(b, "3.10.8"), "delays", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", "http://"+addr)
	for _, want := range []string{
		"(RabbitMQ 3.10.8): 0 waiting, 0 undeliverable: at least 0 in all\n",
		"messages waiting to be dead-lettered and unacked ones cannot be seen without the management API (the management plugin is not reachable at http://" + addr,
		"so a level that shows 0 may still hold messages",
		"01     acemq.delay.v1.01             250ms         0      unknown  unknown\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("status %d", code)
	}
	code, out, _ = cli(t, asRabbitMQ(b, "3.10.8"), "delays", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", "http://"+addr, "--json")
	var got delaysOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("%d %v\n%s", code, err, out)
	}
	if got.DeadLettering != nil || got.Unacked != nil || got.Levels[1].DeadLettering != nil || got.Unseen == "" || !strings.Contains(got.ManagementError, "not reachable") {
		t.Errorf("%s", out)
	}

	mgmt := newMemoryManagement(t, b, "prod")
	mgmt.unsample(delay.Level(1))
	code, out, _ = cli(t, asRabbitMQ(b, "3.10.8"), "delays", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", mgmt.URL)
	for _, want := range []string{
		"0 waiting, 0 undeliverable: at least 0 in all\nthe management API has not sampled 1 delay queue yet",
		"01     acemq.delay.v1.01             250ms         0      not sampled yet  not sampled yet\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	if code != 1 { // the exchange is still missing
		t.Errorf("status %d", code)
	}
	// A management URL that is none is a usage error, its password unsaid.
	code, out, errOut := cli(t, asRabbitMQ(b, "3.10.8"), "delays", "--url", "amqp://ops:pw@rabbit.internal/prod", "--management", "ftp://ops:s3cr3t@x")
	if code != 2 || !strings.Contains(errOut, "--management: want http://host:15672") || strings.Contains(out+errOut, "s3cr3t") {
		t.Errorf("status %d\n%s%s", code, out, errOut)
	}
}
