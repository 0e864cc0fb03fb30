package main

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
)

// nestedTable is a table nested depth levels deep: RabbitMQ takes it,
// amqp091-go writes it, and amqp091-go's reader refuses it past 32.
func nestedTable(depth int) amqp.Table {
	top := amqp.Table{}
	for cur := top; depth > 0; depth-- {
		next := amqp.Table{}
		cur["n"] = next
		cur = next
	}
	return top
}

// publishPoison puts on queue, by amqp091-go directly, a message whose
// headers nest 40 deep, confirmed.
func publishPoison(t *testing.T, u, queue, id string) {
	t.Helper()
	conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, true, false, amqp.Publishing{
		Headers: amqp.Table{acemq.HeaderID: id, "x-nested": nestedTable(40)}, DeliveryMode: amqp.Persistent, Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
		t.Fatalf("the poison was not confirmed: %v", err)
	}
}

// TestRabbitMQReadPoison: issue 24's item 5. A .dlq whose head (or third
// message) holds headers nested 40 deep, which RabbitMQ accepts and
// amqp091-go refuses, closing the connection it reads on. peek, triage and
// replay stop with the server's advice instead of the bare frame error;
// peek shows what it read before the poison; nothing is consumed or moved,
// and the queue keeps every message.
func TestRabbitMQReadPoison(t *testing.T) {
	t.Parallel()
	u := rabbitURL(t)
	tr := rabbitTransport(t, u)
	created := time.Now().Add(-time.Hour)
	advice := "Remove it with the management UI's Get messages (ack mode: reject, requeue false, dead-letters it)"

	head := rabbitQueue()
	declareFamily(t, tr, u, head)
	publishPoison(t, u, head+".dlq", "poison")
	seedDeadLetter(t, tr, head, "m-1", "exhausted 5 attempts: warehouse timeout", created)
	seedDeadLetter(t, tr, head, "m-2", "exhausted 5 attempts: warehouse timeout", created)
	waitDepth(t, tr, head+".dlq", 3)
	for _, args := range [][]string{
		{"peek", "--url", u, "--queue", head + ".dlq"},
		{"triage", "--url", u, head + ".dlq"},
		{"triage", "--url", u, head + ".dlq", "--discard", "g00000000", "--why", "x", "--operator", "o", "--to-file", t.TempDir() + "/a.jsonl"},
		{"replay", "--url", u, "--queue", head},
	} {
		code, out, errOut := cli(t, dialRabbitMQ, args...)
		if code != 1 || !strings.Contains(errOut, "is at the head of queue "+head+".dlq") || !strings.Contains(errOut, advice) {
			t.Errorf("%q: status %d, want 1 with the advice:\n%s%s", args, code, out, errOut)
		}
		waitDepth(t, tr, head+".dlq", 3)
	}
	if info, err := tr.Inspect(context.Background(), head); err != nil || info.Messages != 0 {
		t.Errorf("replay moved something: %+v %v", info, err)
	}

	// The poison third: peek shows the two before it, then why it stops.
	third := rabbitQueue()
	declareFamily(t, tr, u, third)
	seedDeadLetter(t, tr, third, "m-1", "exhausted 5 attempts: warehouse timeout", created)
	seedDeadLetter(t, tr, third, "m-2", "the handler rejected it: no such customer", created)
	publishPoison(t, u, third+".dlq", "poison")
	waitDepth(t, tr, third+".dlq", 3)
	code, out, errOut := cli(t, dialRabbitMQ, "peek", "--url", u, "--queue", third+".dlq")
	if code != 1 || !strings.Contains(out, "m-1 ") || !strings.Contains(out, "m-2 ") || !strings.Contains(errOut, advice) {
		t.Errorf("peek, the poison third: status %d\n%s%s", code, out, errOut)
	}
	waitDepth(t, tr, third+".dlq", 3)
}
