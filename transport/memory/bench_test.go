package memory_test

import (
	"context"
	"testing"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// benchPublishing looks like what the acemq server publishes: persistent,
// mandatory, a handful of headers and a small JSON body.
func benchPublishing(queue string) transport.Publishing {
	p := transport.Publishing{
		RoutingKey: queue,
		Mandatory:  true,
		Headers: map[string]any{
			"x-acemq-id":      "0190f5a2-7c1e-7b6e-9d1a-2f6c7e1d9a10",
			"x-acemq-attempt": 1,
			"x-acemq-created": int64(1717171717000),
		},
		Body: []byte(`{"order":42,"sku":"A-1","qty":3}`),
	}
	p.ContentType = "application/json"
	p.DeliveryMode = 2
	return p
}

func benchSetup(b *testing.B, opts ...memory.Option) (*memory.Conn, context.Context) {
	b.Helper()
	broker := memory.New(opts...)
	conn := broker.Connect()
	b.Cleanup(func() { _ = broker.Close() })
	ctx := context.Background()
	if err := conn.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: "bench", Durable: true}}}); err != nil {
		b.Fatal(err)
	}
	return conn, ctx
}

// BenchmarkPublishConsumeAck: one goroutine publishes, receives and acks,
// one message at a time: the latency of the whole path.
func BenchmarkPublishConsumeAck(b *testing.B) {
	conn, ctx := benchSetup(b)
	sub, err := conn.Consume(ctx, "bench", transport.ConsumeOptions{Prefetch: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	p := benchPublishing("bench")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := conn.Publish(ctx, p); err != nil {
			b.Fatal(err)
		}
		d := <-sub.Deliveries()
		if err := d.Ack(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPipeline: a publisher and a consumer (prefetch 256) on their
// own goroutines, as a server runs: the throughput of the broker.
func BenchmarkPipeline(b *testing.B) {
	conn, ctx := benchSetup(b, memory.WithRealClock())
	sub, err := conn.Consume(ctx, "bench", transport.ConsumeOptions{Prefetch: 256})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	p := benchPublishing("bench")
	n := b.N
	done := make(chan struct{})
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		defer close(done)
		for range n {
			d := <-sub.Deliveries()
			if err := d.Ack(); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	for range n {
		if _, err := conn.Publish(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	<-done
}

// BenchmarkPublish: publishing to a queue nobody consumes.
func BenchmarkPublish(b *testing.B) {
	conn, ctx := benchSetup(b)
	p := benchPublishing("bench")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := conn.Publish(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}
