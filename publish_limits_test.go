package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// TestPublisherTooLarge: what AMQP cannot carry comes back from Publish as
// a *PublishError that is transport.ErrTooLarge, naming the limit, and the
// next publish goes through. An id too long for message-id is no such
// thing: it travels in x-acemq-id alone.
func TestPublisherTooLarge(t *testing.T) {
	t.Parallel()
	b := memory.New()
	t.Cleanup(func() { _ = b.Close() })
	c := b.Connect()
	ctx := context.Background()
	if err := c.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: "q", Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	pub := &acemq.Publisher{Transport: c, Mandatory: true}
	long := strings.Repeat("x", 300)
	for _, tt := range []struct {
		field string
		o     acemq.Outgoing
	}{
		{"correlation-id", acemq.Outgoing{RoutingKey: "q", CorrelationID: long}},
		{"content-type", acemq.Outgoing{RoutingKey: "q", ContentType: long}},
		{long, acemq.Outgoing{RoutingKey: "q", Headers: map[string]any{long: 1}}},
		{"headers", acemq.Outgoing{RoutingKey: "q", Headers: map[string]any{"big": strings.Repeat("b", memory.FrameMax)}}},
	} {
		_, err := pub.Publish(ctx, tt.o)
		var pe *acemq.PublishError
		var le *transport.LimitError
		if !errors.As(err, &pe) || !errors.Is(err, transport.ErrTooLarge) || !errors.As(err, &le) {
			t.Fatalf("Publish breaking %.20s: %v, want a *PublishError that is ErrTooLarge", tt.field, err)
		}
		if le.Field != tt.field || pe.RoutingKey != "q" {
			t.Errorf("LimitError.Field %.20q, PublishError.RoutingKey %q; want %.20q, q", le.Field, pe.RoutingKey, tt.field)
		}
	}
	if res, err := pub.Publish(ctx, acemq.Outgoing{RoutingKey: "q", ID: long}); err != nil || !res.Routed {
		t.Fatalf("Publish with an id of 300 bytes: %+v, %v", res, err)
	}
	if got := b.Depth("q"); got != 1 {
		t.Errorf("q holds %d messages, want 1", got)
	}
}
