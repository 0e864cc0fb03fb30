package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The commands again on RabbitMQ, through the dialer main uses.

func rabbitURL(t *testing.T) string {
	t.Helper()
	return brokertest.Env(t, EnvURL)
}

func rabbitQueue() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "cli.orders." + hex.EncodeToString(b)
}

// rabbitTransport is a connection of the test's own, to seed and inspect.
func rabbitTransport(t *testing.T, u string) *rabbitmq.Transport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tr, err := rabbitmq.Dial(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func TestRabbitMQCommands(t *testing.T) {
	t.Parallel()
	u := rabbitURL(t)
	q := rabbitQueue()
	tr := rabbitTransport(t, u)
	t.Cleanup(func() { deleteQueues(t, u, q, q+".dlq", q+".parked", q+".retry.40s") })

	code, out, errOut := cli(t, dialRabbitMQ, "topology", "--url", u, "--queue", q, "--attempts", "3", "--initial", "40s", "--fixed", "--apply")
	if code != 0 || !strings.Contains(out, "declared on ") || !strings.Contains(out, q+".retry.40s") {
		t.Fatalf("topology: %d\n%s%s", code, out, errOut)
	}
	if _, err := tr.Inspect(context.Background(), q+".retry.40s"); err != nil {
		t.Fatalf("the rung was not declared: %v", err)
	}
	created := time.Now().Add(-3 * time.Hour)
	for i, reason := range []string{"exhausted 3 attempts: warehouse timeout", "the handler rejected it: no such customer", "exhausted 3 attempts: warehouse timeout"} {
		seedDeadLetter(t, tr, q, "m-"+string(rune('1'+i)), reason, created)
	}

	code, out, errOut = cli(t, dialRabbitMQ, "peek", "--url", u, "--queue", q+".dlq")
	want := q + `.dlq: 3 ready, showing the first 3 (none consumed)
ID   ATTEMPT  AGE  REASON
m-1  5        3h   exhausted 3 attempts: warehouse timeout
m-2  5        3h   the handler rejected it: no such customer
m-3  5        3h   exhausted 3 attempts: warehouse timeout
`
	// The age is to the second, and asking the management API what the
	// read costs can take a few (until it has sampled the new queue).
	aged := regexp.MustCompile(`(?m)^(m-\d)\s+5\s+3h(?:\d+s)?\s+`).ReplaceAllString(out, "$1  5        3h   ")
	aged = strings.Replace(aged, "ATTEMPT  AGE   REASON", "ATTEMPT  AGE  REASON", 1)
	if code != 0 || aged != want {
		t.Fatalf("peek: %d\n%s\nwant\n%s%s", code, out, want, errOut)
	}
	waitDepth(t, tr, q+".dlq", 3)

	code, out, errOut = cli(t, dialRabbitMQ, "replay", "--url", u, "--queue", q, "--match", "warehouse")
	if code != 0 || out != "moved 2, skipped 1 (drained)\n" {
		t.Fatalf("replay: %d\n%s%s", code, out, errOut)
	}
	waitDepth(t, tr, q, 2)
	waitDepth(t, tr, q+".dlq", 1)
	d, ok, err := tr.Get(context.Background(), q+".dlq")
	if err != nil || !ok || acemq.NewMessage(q, d.Body, d.Headers).ID() != "m-2" {
		t.Fatalf("left in the dlq: %v %v %v", d.Headers, ok, err)
	}
	_ = d.Reject(true)

	// A target that is not there: nothing moves, exit status 1.
	code, _, errOut = cli(t, dialRabbitMQ, "replay", "--url", u, "--queue", q, "--to", q+".v2")
	if code != 1 || !strings.Contains(errOut, "NOT_FOUND") {
		t.Errorf("replay to a missing queue: %d %s", code, errOut)
	}
	waitDepth(t, tr, q+".dlq", 1)
}

// TestRabbitMQBadPassword: the broker refuses the login; the error says so
// without the password.
func TestRabbitMQBadPassword(t *testing.T) {
	t.Parallel()
	parsed, err := url.Parse(rabbitURL(t))
	if err != nil {
		t.Fatal(err)
	}
	parsed.User = url.UserPassword(parsed.User.Username(), "not-the-Pa55word")
	code, out, errOut := cli(t, dialRabbitMQ, "peek", "--url", parsed.String(), "--queue", "x.dlq")
	if code != 1 || strings.Contains(out+errOut, "not-the-Pa55word") || !strings.Contains(errOut, ":xxxxx@") {
		t.Errorf("status %d:\n%s%s", code, out, errOut)
	}
}

func waitDepth(t *testing.T, tr transport.Transport, q string, want int) {
	t.Helper()
	var info transport.QueueInfo
	var err error
	if !polltest.Until(polltest.Generous, func() bool {
		info, err = tr.Inspect(context.Background(), q)
		return err == nil && info.Messages == want
	}) {
		t.Fatalf("%s holds %d (%v), want %d", q, info.Messages, err, want)
	}
}

func deleteQueues(t *testing.T, u string, queues ...string) {
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	defer conn.Close()
	for _, q := range queues {
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(q, false, false, false)
			_ = ch.Close()
		}
	}
}

// rabbitVhost is a vhost of the test's own: the delay queues are one set
// per vhost, and a peek must not hold another test's waiting messages.
func rabbitVhost(t *testing.T) string {
	t.Helper()
	u, _ := brokertest.FreshVhost(t, "", rabbitURL(t))
	return u
}

func TestRabbitMQTopologyDelays(t *testing.T) {
	t.Parallel()
	u := rabbitVhost(t)
	q := rabbitQueue()
	code, out, errOut := cli(t, dialRabbitMQ, "topology", "--url", u, "--delays", "--queue", q, "--apply")
	if code != 0 || !strings.Contains(out, "declared on ") || !strings.Contains(out, "queue     "+delay.Level(27)) || strings.Contains(out, "classic") {
		t.Fatalf("topology --delays: %d\n%s%s", code, out, errOut)
	}
	tr := rabbitTransport(t, u)
	ctx := context.Background()
	for k := range delay.Levels {
		if _, err := tr.Inspect(ctx, delay.Level(k)); err != nil {
			t.Fatalf("level %d was not declared: %v", k, err)
		}
	}
	// Declared with the arguments a server declares: declaring again is
	// no change, from the CLI or from Go.
	if err := tr.Declare(ctx, delay.Topology()); err != nil {
		t.Fatalf("the delay queues differ from delay.Topology(): %v", err)
	}
	if code, out, errOut := cli(t, dialRabbitMQ, "topology", "--url", u, "--delays", "--apply", "--json"); code != 0 || !strings.Contains(out, `"delay_queues": "quorum"`) {
		t.Fatalf("again: %d\n%s%s", code, out, errOut)
	}
	// Bound: a delayed message reaches q, not before it is due.
	start := time.Now()
	p := transport.Publishing{Mandatory: true, Body: []byte("soon")}
	if _, err := delay.Aim(&p, q, 500*time.Millisecond, start); err != nil {
		t.Fatal(err)
	}
	if c, err := tr.Publish(ctx, p); err != nil || !c.Routed {
		t.Fatalf("%+v %v", c, err)
	}
	waitDepth(t, tr, q, 1)
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Errorf("delivered after %v, before it was due", took)
	}
}

// TestRabbitMQDelaysPeek: acemq delays counts each level and the
// undeliverable queue; --peek reads what it may on this broker's version,
// gives everything back, and leaves due times alone.
func TestRabbitMQDelaysPeek(t *testing.T) {
	t.Parallel()
	u := rabbitVhost(t)
	q := rabbitQueue()
	gone := q + ".gone"
	for _, queue := range []string{q, gone} {
		if code, out, errOut := cli(t, dialRabbitMQ, "topology", "--url", u, "--delays", "--queue", queue, "--apply"); code != 0 {
			t.Fatalf("topology: %d\n%s%s", code, out, errOut)
		}
	}
	tr := rabbitTransport(t, u)
	ctx := context.Background()
	product, version, err := tr.BrokerVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(queue string, d time.Duration, id string) time.Time {
		t.Helper()
		now := time.Now()
		p := transport.Publishing{Mandatory: true, Headers: map[string]any{acemq.HeaderID: id}, Body: []byte(id)}
		r, err := delay.Aim(&p, queue, d, now)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := tr.Publish(ctx, p); err != nil || !c.Routed {
			t.Fatalf("%+v %v", c, err)
		}
		return now.Add(r.Wait)
	}
	publish(gone, 300*time.Millisecond, "g-1")
	deleteQueues(t, u, gone)
	waitDepth(t, tr, delay.Undeliverable, 1)
	publish(q, time.Hour, "o-1") // n = 28800: level 14 first
	publish(q, time.Hour, "o-2")
	publish(q, 30*time.Second, "o-3") // n = 240: level 07 first
	waitDepth(t, tr, delay.Level(14), 2)
	waitDepth(t, tr, delay.Level(7), 1)

	// The management API's counts are its last sample: wait for the one
	// that has every level (a level not sampled yet is said to be).
	var code int
	var out, errOut string
	polltest.UntilEvery(30*time.Second, time.Second, func() bool {
		code, out, errOut = cli(t, dialRabbitMQ, "delays", "--url", u)
		return !strings.Contains(out, "not sampled yet")
	})
	for _, want := range []string{
		" (" + product + " " + version + "): 3 waiting, 0 waiting to be dead-lettered, 1 undeliverable: 4 in all\n",
		"07     acemq.delay.v1.07             16s           1      0        0\n",
		"14     acemq.delay.v1.14             34m8s         2      0        0\n",
		"-      acemq.delay.v1.undeliverable  -             1      0        0\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("delays: %d, missing %q in\n%s%s", code, want, out, errOut)
		}
	}
	if strings.Contains(out+errOut, "guest:guest@") {
		t.Errorf("the password was printed:\n%s%s", out, errOut)
	}

	// A message due in 2s, waiting while the peek runs, arrives on time.
	due := publish(q, 2*time.Second, "o-4")
	code, out, errOut = cli(t, dialRabbitMQ, "delays", "--url", u, "--peek", "10", "--json")
	var got delaysOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Peek == nil {
		t.Fatalf("delays --peek: %d %v\n%s%s", code, err, out, errOut)
	}
	p := got.Peek
	if len(p.Undeliverable) != 1 || p.Undeliverable[0].Queue != gone || p.Undeliverable[0].Messages != 1 || p.Undeliverable[0].Earliest == nil {
		t.Errorf("undeliverable: %+v", p.Undeliverable)
	}
	if refusal := levelPeekRefusal(product, version); refusal != "" {
		t.Logf("%s %s: %s", product, version, refusal)
		if p.Levels || p.LevelsSkipped != refusal || len(p.Waiting) != 0 || p.Peeked != 1 {
			t.Errorf("levels peeked where returns go to the back: %+v", p)
		}
	} else if !p.Levels || len(p.Waiting) != 1 || p.Waiting[0].Queue != q || p.Waiting[0].Messages < 3 || p.Waiting[0].Latest == nil ||
		time.Until(*p.Waiting[0].Latest) < 59*time.Minute {
		t.Errorf("levels: %+v", p)
	}
	waitDepth(t, tr, q, 1) // o-4
	if arrived := time.Now(); arrived.Before(due) || arrived.Sub(due) > 2*time.Second {
		t.Errorf("o-4 was due at %v and arrived %v later", due.Format(time.StampMilli), arrived.Sub(due))
	}
	// Nothing consumed.
	waitDepth(t, tr, delay.Level(14), 2)
	waitDepth(t, tr, delay.Undeliverable, 1)

	code, out, errOut = cli(t, dialRabbitMQ, "delays", "--url", u, "--peek", "10")
	if code != 0 || !strings.Contains(out, "in acemq.delay.v1.undeliverable, by destination:\n") || !strings.Contains(out, gone+"  1 ") {
		t.Errorf("delays --peek: %d\n%s%s", code, out, errOut)
	}
	t.Logf("acemq delays --peek 10 on %s %s:\n%s", product, version, out)
}
