package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
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
	if code != 0 || out != want {
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
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := tr.Inspect(context.Background(), q)
		if err == nil && info.Messages == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d (%v), want %d", q, info.Messages, err, want)
		}
		time.Sleep(10 * time.Millisecond)
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
