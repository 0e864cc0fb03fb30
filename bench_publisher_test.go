package acemq_test

import (
	"context"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
)

// confirmAll is a transport whose every publish is confirmed and routed at
// once: what Publisher.Publish itself costs (the id, the wire contract's
// headers, the producer span and the trace context), without a broker's.
type confirmAll struct{ transport.Transport }

func (confirmAll) Publish(context.Context, transport.Publishing) (transport.Confirmation, error) {
	return transport.Confirmation{Routed: true}, nil
}

// BenchmarkPublisherPublish is Publisher.Publish of the bench module's
// publish scenario (a mandatory publish to a queue with a content type,
// tracing left at otel's defaults) on a transport that confirms at once.
// Its allocs/op are the publisher's own, per message.
func BenchmarkPublisherPublish(b *testing.B) {
	p := &acemq.Publisher{Transport: confirmAll{}, Mandatory: true}
	o := acemq.Outgoing{RoutingKey: "bench", Body: make([]byte, 256), ContentType: "application/json"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Publish(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
}
