package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
)

// TestRabbitMQStatus: status on RabbitMQ, from the management plugin
// (scripts/test enables it on the shared broker) at the address it derives
// from the URL, and without it, from passive declares of the queues named.
func TestRabbitMQStatus(t *testing.T) {
	t.Parallel()
	u := rabbitVhost(t)
	q := rabbitQueue()
	if code, out, errOut := cli(t, dialRabbitMQ, "topology", "--url", u, "--queue", q, "--attempts", "3", "--initial", "40s", "--fixed", "--apply"); code != 0 {
		t.Fatalf("topology: %d\n%s%s", code, out, errOut)
	}
	tr := rabbitTransport(t, u)
	for i, reason := range []string{"exhausted 3 attempts: warehouse timeout", "the handler rejected it: no such customer", "exhausted 3 attempts: warehouse timeout"} {
		seedDeadLetter(t, tr, q, "m-"+string(rune('1'+i)), reason, time.Now())
	}
	for range 2 {
		if c, err := tr.Publish(context.Background(), transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("work")}); err != nil || !c.Routed {
			t.Fatalf("%+v %v", c, err)
		}
	}
	waitDepth(t, tr, q+".dlq", 3)

	// The plugin's numbers are its last sample: wait for the one that
	// has the messages.
	var got statusOut
	var out string
	if !polltest.UntilEvery(30*time.Second, time.Second, func() bool {
		var code int
		var errOut string
		code, out, errOut = cli(t, dialRabbitMQ, "status", "--url", u, "--json")
		got = statusOut{}
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("status: %d %v\n%s%s", code, err, out, errOut)
		}
		return len(got.Services) == 1 && len(got.Services[0].Queues) == 4 && messages(got.Services[0].Queues[0]) == 2 && messages(got.Services[0].Queues[1]) == 3 &&
			sampled(got.Services[0].Queues[0])
	}) {
		t.Fatalf("status never showed 2 in %s and 3 in its .dlq:\n%s", q, out)
	}
	s := got.Services[0]
	if got.Source != "management API" || got.Management != "http://localhost:15672" || s.Queue != q ||
		s.Queues[1].Name != q+".dlq" || s.Queues[2].Name != q+".parked" || s.Queues[3].Name != q+".retry.40s" || s.Queues[3].Role != roleRung ||
		*s.Queues[0].Ready != 2 || *s.Queues[0].Unacked != 0 || *s.Queues[0].Consumers != 0 || s.Queues[0].Type != "classic" {
		t.Errorf("%+v", got)
	}
	code, out, errOut := cli(t, dialRabbitMQ, "status", "--url", u)
	if code != 0 || !strings.Contains(out, "from the management API at http://localhost:15672: 1 service\n") || !strings.Contains(out, "\n  "+q+".dlq ") ||
		strings.Contains(out+errOut, "guest:guest") {
		t.Errorf("status: %d\n%s%s", code, out, errOut)
	}
	t.Logf("acemq status:\n%s", out)

	// Without the plugin: said, and the named queues by passive declare.
	addr := closedPort(t)
	code, out, errOut = cli(t, dialRabbitMQ, "status", "--url", u, "--management", "http://"+addr, "--queue", q, "--json")
	got = statusOut{}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("status: %d %v\n%s%s", code, err, out, errOut)
	}
	if !strings.Contains(errOut, "the management plugin is not reachable at http://"+addr) || !strings.Contains(errOut, "rabbitmq-plugins enable rabbitmq_management; showing only the queues named") {
		t.Errorf("stderr: %s", errOut)
	}
	if got.Source != "passive declares" || len(got.Services) != 1 || len(got.Services[0].Queues) != 3 ||
		orNone(got.Services[0].Queues[0].Ready) != 2 || orNone(got.Services[0].Queues[1].Ready) != 3 || orNone(got.Services[0].Queues[2].Ready) != 0 || got.Services[0].Queues[1].Unacked != nil {
		t.Errorf("%s", out)
	}
	code, out, errOut = cli(t, dialRabbitMQ, "status", "--url", u, "--management", "http://"+addr, "--queue", q)
	if code != 0 || !strings.Contains(out, "from the passive declares: 1 service\n") {
		t.Errorf("status: %d\n%s%s", code, out, errOut)
	}
	t.Logf("acemq status without the management plugin:\n%s%s", errOut, out)
}

// orNone is *n, or -1 for no count.
func orNone(n *int) int {
	if n == nil {
		return -1
	}
	return *n
}

// sampled says the management API has filled in every count of q: it
// reports a new queue before its first sample of ready, unacked and
// consumers.
func sampled(q queueStat) bool { return q.Ready != nil && q.Unacked != nil && q.Consumers != nil }

func messages(q queueStat) int {
	if q.Messages == nil {
		return -1
	}
	return *q.Messages
}

// TestRabbitMQDeadLettering: on RabbitMQ, a message a delay level holds to
// be dead-lettered (its next level's exchange deleted) is neither ready
// nor unacked; status and delays show it from the management API's
// messages_dlx, and a count the API has not sampled is never shown as a
// number: a queue is either sampled, with its counts, or flagged.
func TestRabbitMQDeadLettering(t *testing.T) {
	t.Parallel()
	u := rabbitVhost(t)
	q := rabbitQueue()
	if code, out, errOut := cli(t, dialRabbitMQ, "topology", "--url", u, "--delays", "--queue", q, "--apply"); code != 0 {
		t.Fatalf("topology: %d\n%s%s", code, out, errOut)
	}
	// Straight after the declare: flagged, or counted, never a count missing unflagged.
	code, out, errOut := cli(t, dialRabbitMQ, "status", "--url", u, "--json")
	var got statusOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("status: %d %v\n%s%s", code, err, out, errOut)
	}
	for _, s := range append(got.Services, service{Queues: got.Delays}) {
		for _, st := range s.Queues {
			if !st.Missing && !st.NotSampledYet && (st.Messages == nil || st.Ready == nil || st.Unacked == nil) {
				t.Errorf("%s: a count missing and not flagged not sampled yet: %+v", st.Name, st)
			}
		}
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
	if err := ch.ExchangeDelete(delay.Level(0), false, false); err != nil {
		t.Fatal(err)
	}
	tr := rabbitTransport(t, u)
	p := transport.Publishing{Mandatory: true, Headers: map[string]any{acemq.HeaderID: "held-1"}, Body: []byte("held")}
	if _, err := delay.Aim(&p, q, 3*delay.Unit, time.Now()); err != nil { // level 01, then 00
		t.Fatal(err)
	}
	if c, err := tr.Publish(context.Background(), p); err != nil || !c.Routed {
		t.Fatalf("%+v %v", c, err)
	}

	var level *queueStat
	if !polltest.UntilEvery(30*time.Second, time.Second, func() bool {
		code, out, _ = cli(t, dialRabbitMQ, "status", "--url", u, "--json")
		got = statusOut{}
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("status: %d %v\n%s", code, err, out)
		}
		level = nil
		for i := range got.Delays {
			if got.Delays[i].Name == delay.Level(1) {
				level = &got.Delays[i]
			}
		}
		// A sample can have the one number and not yet the others.
		return level != nil && level.DeadLettering != nil && *level.DeadLettering == 1 &&
			level.Ready != nil && level.Unacked != nil && level.Messages != nil
	}) {
		t.Fatalf("status never showed level 01 holding 1 to be dead-lettered, with its ready, unacked and message counts:\n%s", out)
	}
	if *level.Ready != 0 || *level.Unacked != 0 || *level.Messages != 1 {
		t.Errorf("level 01: %+v; want 1 message, none ready or unacked", *level)
	}
	code, out, errOut = cli(t, dialRabbitMQ, "status", "--url", u)
	if !strings.Contains(out, "1 message waiting to be dead-lettered on "+delay.Level(1)) {
		t.Errorf("status: %d\n%s%s", code, out, errOut)
	}
	t.Logf("acemq status:\n%s", out)
	// delays reads every level's counts: wait for a sample of all 28 (a
	// loaded broker samples the newest levels seconds after the rest; a
	// CI run beside a benchmark took over 30 s for ten of them).
	polltest.UntilEvery(120*time.Second, time.Second, func() bool {
		code, out, errOut = cli(t, dialRabbitMQ, "delays", "--url", u)
		return !strings.Contains(out+errOut, "not sampled") // the table's rows, and the note (on stderr)
	})
	if code != 1 || !strings.Contains(out, "0 waiting, 1 waiting to be dead-lettered, 0 undeliverable: 1 in all") ||
		!strings.Contains(out, "missing exchanges: "+delay.Level(0)) || !strings.Contains(errOut, "declare them with: acemq topology --delays --apply") {
		t.Errorf("delays: %d\n%s%s", code, out, errOut)
	}
	t.Logf("acemq delays:\n%s%s", out, errOut)
}
