package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/slip"
)

// TestRabbitMQPeekSlip: a slip published as a foreign family member
// would (raw amqp091-go, the document as a long string) to a stop's
// .dlq, where its dead letter waits with compensation begun, shows its
// slip block in peek and in peek --json, and is still in the queue
// afterwards: peek consumed nothing.
func TestRabbitMQPeekSlip(t *testing.T) {
	t.Parallel()
	u := rabbitURL(t)
	q := rabbitQueue()
	t.Cleanup(func() { deleteQueues(t, u, q, q+".dlq", q+".parked") })
	if code, out, errOut := cli(t, dialRabbitMQ, "topology", "--url", u, "--queue", q, "--apply"); code != 0 {
		t.Fatalf("topology: %d\n%s%s", code, out, errOut)
	}
	_, ch := rawChannel(t, u)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	doc := strings.ReplaceAll(slipCompensating, "shipping.ship", q)
	conf, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q+".dlq", true, false, amqp.Publishing{
		MessageId: "5a4c0e2e.2", DeliveryMode: amqp.Persistent, ContentType: "application/json",
		Headers: amqp.Table{"x-acemq-id": "5a4c0e2e.2", "x-acemq-error": "exhausted 5 attempts: no courier", slip.Header: doc},
		Body:    []byte(`{"order":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := conf.WaitContext(context.Background()); !ok || err != nil {
		t.Fatalf("the publish was not confirmed: %v %v", ok, err)
	}
	tr := rabbitTransport(t, u)
	waitDepth(t, tr, q+".dlq", 1)

	code, out, errOut := cli(t, dialRabbitMQ, "peek", "--url", u, "--queue", q+".dlq")
	if code != 0 {
		t.Fatalf("peek: %d\n%s%s", code, out, errOut)
	}
	t.Logf("\n%s", out)
	for _, want := range []string{
		"5a4c0e2e.2  1        ",
		"\n  slip 5a4c0e2e (fulfil-order) of 5a4c0e2e.2\n",
		"\n    where:        compensating: next card.refund (0 run, 2 to run)\n",
		"\n    compensations, in the order they run (the last registered first):\n      card.refund (registered by card.charge): {\"payment\":\"p-9\"}\n      stock.release (registered by stock.reserve)\n",
		"\n    fault:        at " + q + ", 2026-12-02 08:02:00.789Z: exhausted 5 attempts: no courier\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("peek lacks %q", want)
		}
	}
	waitDepth(t, tr, q+".dlq", 1)

	code, out, errOut = cli(t, dialRabbitMQ, "peek", "--url", u, "--queue", q+".dlq", "--json")
	var got struct {
		Messages []struct {
			Slip *struct {
				Document *slip.Document `json:"document"`
				Position slipPosition   `json:"position"`
			} `json:"slip"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Messages) != 1 || got.Messages[0].Slip == nil || got.Messages[0].Slip.Document == nil {
		t.Fatalf("peek --json: %d %v\n%s%s", code, err, out, errOut)
	}
	s := got.Messages[0].Slip
	if s.Document.State != slip.StateCompensating || s.Document.Fault == nil || s.Document.Fault.Stop != q || s.Position.NextCompensation != "card.refund" || s.Position.Compensations != 2 {
		t.Errorf("peek --json: %s", out)
	}
	waitDepth(t, tr, q+".dlq", 1)
}
