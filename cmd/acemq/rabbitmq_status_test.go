package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, out, errOut := cli(t, dialRabbitMQ, "status", "--url", u, "--json")
		got = statusOut{}
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("status: %d %v\n%s%s", code, err, out, errOut)
		}
		if len(got.Services) == 1 && len(got.Services[0].Queues) == 4 && messages(got.Services[0].Queues[0]) == 2 && messages(got.Services[0].Queues[1]) == 3 &&
			sampled(got.Services[0].Queues[0]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed 2 in %s and 3 in its .dlq:\n%s", q, out)
		}
		time.Sleep(time.Second)
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
