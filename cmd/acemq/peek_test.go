package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
)

// TestHelpOnce: --help prints the usage once, on stdout, and nothing on
// stderr, for every command and for the whole.
func TestHelpOnce(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"help", "peek"}, {"peek", "--help"}, {"replay", "-h"}, {"status", "--help"},
		{"schedule", "--help"}, {"topology", "--help"}, {"delays", "--help"}, {"version", "--help"}, {"peek", "--queue", "x", "--help"}} {
		code, out, errOut := cli(t, noBroker, args...)
		if code != 0 || strings.Count(out, "Usage:") != 1 || errOut != "" {
			t.Errorf("%q: status %d, %d usages on stdout, stderr %q", args, code, strings.Count(out, "Usage:"), errOut)
		}
	}
}

// TestReplayNamedTheDLQ: --queue orders.dlq means --queue orders; say so.
func TestReplayNamedTheDLQ(t *testing.T) {
	t.Parallel()
	_, dial := memoryBroker(t, "orders", "exhausted 5 attempts: timeout")
	for _, c := range []struct{ queue, says string }{
		{"orders.dlq", "orders.dlq.dlq does not exist: --queue takes the work queue, not orders.dlq: did you mean --queue orders?"},
		{"orders.parked", "did you mean --queue orders --from parked?"},
	} {
		code, _, errOut := cli(t, dial, "replay", "--url", "amqp://x/", "--queue", c.queue)
		if code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("%s: status %d\n%s", c.queue, code, errOut)
		}
	}
	// A work queue that is missing is not second-guessed.
	if code, _, errOut := cli(t, dial, "replay", "--url", "amqp://x/", "--queue", "payments"); code != 1 || strings.Contains(errOut, "did you mean") {
		t.Errorf("status %d\n%s", code, errOut)
	}
}

// TestPeekJSONHeadersAndDeath: --json has every header, byte arrays as
// text, and when the broker dead-lettered the message, when.
func TestPeekJSONHeadersAndDeath(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders", "exhausted 5 attempts: timeout")
	conn := b.Connect()
	defer conn.Close()
	died := time.Date(2026, 12, 1, 8, 59, 30, 0, time.UTC)
	_, err := conn.Publish(context.Background(), transport.Publishing{RoutingKey: "orders.dlq", Mandatory: true,
		Headers: map[string]any{acemq.HeaderID: "b-1", "trace": []byte("abc"), "x-death": []any{
			map[string]any{"queue": "orders", "reason": "rejected", "count": int64(1), "time": died, "routing-keys": []any{"orders"}},
		}}, Body: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, dial, "peek", "--url", "amqp://x/", "--queue", "orders.dlq", "--json")
	var got peekOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Messages) != 2 {
		t.Fatalf("%d %v\n%s%s", code, err, out, errOut)
	}
	ours, broker := got.Messages[0], got.Messages[1]
	if ours.DeadLettered != nil || ours.Headers[acemq.HeaderError] != "exhausted 5 attempts: timeout" || ours.Headers[acemq.HeaderID] != "m-1" {
		t.Errorf("acemq's dead letter: %+v", ours)
	}
	if broker.DeadLettered == nil || !broker.DeadLettered.Equal(died) || broker.Headers["trace"] != "abc" {
		t.Errorf("the broker's dead letter: %+v", broker)
	}
	if deaths, _ := broker.Headers["x-death"].([]any); len(deaths) != 1 || deaths[0].(map[string]any)["reason"] != "rejected" {
		t.Errorf("x-death: %#v", broker.Headers["x-death"])
	}
}

// TestPeekMatch: peek with replay's filters is a dry run of the replay:
// it reads the whole queue, lists what matches, and moves nothing.
func TestPeekMatch(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders", "exhausted 5 attempts: warehouse timeout", "the handler rejected it: no such customer",
		"exhausted 5 attempts: warehouse timeout", "exhausted 5 attempts: warehouse down")
	code, out, errOut := cli(t, dial, "peek", "--url", "amqp://x/", "--queue", "orders.dlq", "--match", "warehouse", "--limit", "2")
	want := `orders.dlq: 4 ready; of the 4 read, 3 match: a replay with this filter would move 3; showing 2 (none consumed)
ID   ATTEMPT  AGE  REASON
m-1  5        2h   exhausted 5 attempts: warehouse timeout
m-3  5        2h   exhausted 5 attempts: warehouse timeout
`
	if code != 0 || out != want {
		t.Errorf("status %d\n%s\nwant\n%s%s", code, out, want, errOut)
	}
	code, out, _ = cli(t, dial, "peek", "--url", "amqp://x/", "--queue", "orders.dlq", "--match", "warehouse", "--id", "m-4", "--json")
	var got peekOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || *got.Read != 4 || *got.Matched != 1 || got.Messages[0].ID != "m-4" {
		t.Errorf("%d %v\n%s", code, err, out)
	}
	conn := b.Connect()
	defer conn.Close()
	if info, err := conn.Inspect(context.Background(), "orders.dlq"); err != nil || info.Messages != 4 {
		t.Errorf("orders.dlq: %+v %v", info, err)
	}
	// The replay the dry run promised.
	if code, out, _ := cli(t, dial, "replay", "--url", "amqp://x/", "--queue", "orders", "--match", "warehouse", "--progress", "0"); code != 0 || out != "moved 3, skipped 1 (drained)\n" {
		t.Errorf("replay: %d %s", code, out)
	}
	if code, _, errOut := cli(t, dial, "peek", "--url", "amqp://x/", "--queue", "orders.dlq", "--match", "("); code != 2 || !strings.Contains(errOut, "--match") {
		t.Errorf("a bad --match: %d %s", code, errOut)
	}
}

// TestRabbitMQPeekDeadLettered: a message RabbitMQ dead-lettered (it
// expired from a queue whose dead-letter route is Q.dlq) shows when, and
// its x-death, in peek --json.
func TestRabbitMQPeekDeadLettered(t *testing.T) {
	t.Parallel()
	u := rabbitURL(t)
	q := rabbitQueue()
	src := q + ".src"
	t.Cleanup(func() { deleteQueues(t, u, q, q+".dlq", q+".parked", src) })
	if code, out, errOut := cli(t, dialRabbitMQ, "topology", "--url", u, "--queue", q, "--apply"); code != 0 {
		t.Fatalf("topology: %d\n%s%s", code, out, errOut)
	}
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(src, false, false, false, false, amqp.Table{"x-message-ttl": int32(1), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": q + ".dlq"}); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	if err := ch.PublishWithContext(context.Background(), "", src, false, false, amqp.Publishing{MessageId: "gone-1", Body: []byte("late")}); err != nil {
		t.Fatal(err)
	}
	tr := rabbitTransport(t, u)
	waitDepth(t, tr, q+".dlq", 1)
	code, out, errOut := cli(t, dialRabbitMQ, "peek", "--url", u, "--queue", q+".dlq", "--json")
	var got peekOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Messages) != 1 {
		t.Fatalf("%d %v\n%s%s", code, err, out, errOut)
	}
	m := got.Messages[0]
	if m.DeadLettered == nil || m.DeadLettered.Before(before.Truncate(time.Second)) || m.DeadLettered.After(time.Now().Add(time.Second)) || m.Headers["x-death"] == nil || m.ID != "gone-1" ||
		!strings.Contains(m.Reason, "expired") {
		t.Errorf("%s", out)
	}
	waitDepth(t, tr, q+".dlq", 1)
}
