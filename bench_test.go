package acemq_test

import (
	"context"
	"errors"

	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// BenchmarkServerMemory is end to end through the server on the memory
// transport: b.N messages pre-published, then consumed through the default
// chain (decode, max age, recover) by an accept-all handler, each acked.
// It reports msgs/s.
func BenchmarkServerMemory(b *testing.B) {
	b.Run("no-meter", func(b *testing.B) { benchServerMemory(b, nil, ack.Accept()) })
	b.Run("sdk-meter", func(b *testing.B) {
		benchServerMemory(b, sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())), ack.Accept())
	})
	// copy: every message is dead-lettered, so each costs a confirmed,
	// mandatory copy to bench.dlq before its original is acked: the
	// settlement's whole path, where accept only acks.
	b.Run("copy", func(b *testing.B) { benchServerMemory(b, nil, ack.DeadLetter(errBench)) })
	// throttled: under a throttle that never limits (a rate and a cap far
	// above what the run reaches): what a throttle costs a delivery when
	// it is not holding anything back, against no-meter.
	// breaker: under a closed circuit breaker: what it costs a delivery
	// when nothing fails, against no-meter.
	b.Run("breaker", func(b *testing.B) {
		benchServerMemory(b, nil, ack.Accept(), func(s *acemq.Server) { s.Breaker = &acemq.Breaker{} })
	})
	b.Run("throttled", func(b *testing.B) {
		benchServerMemory(b, nil, ack.Accept(), func(s *acemq.Server) {
			s.Throttles = map[string]acemq.Throttle{"api": {PerSecond: 1e9, Burst: 1 << 20, Concurrency: 1 << 10}}
			s.Queues = map[string]acemq.QueueConfig{"bench": {Throttles: []string{"api"}}}
		})
	})
}

var errBench = errors.New("bench: set aside")

// benchQueue is a memory broker on the wall clock with the queue "bench"
// declared, a connection to it, and the body every benchmark publishes;
// both close when the benchmark ends.
func benchQueue(b *testing.B) (*memory.Conn, []byte) {
	b.Helper()
	broker := memory.New(memory.WithRealClock())
	b.Cleanup(func() { broker.Close() })
	conn := broker.Connect()
	b.Cleanup(func() { conn.Close() })
	if err := conn.Declare(context.Background(), acemq.Topology("bench", acemq.QueueConfig{}.Retry, nil)); err != nil {
		b.Fatal(err)
	}
	return conn, []byte(`{"id":12345,"customer":"c-778","lines":[{"sku":"A-1","qty":2}],"total":"41.90"}`)
}

func benchServerMemory(b *testing.B, mp metric.MeterProvider, answer ack.Ack, with ...func(*acemq.Server)) {
	conn, body := benchQueue(b)
	ctx := context.Background()
	pub := transport.Publishing{RoutingKey: "bench", Headers: map[string]any{acemq.HeaderID: "x", acemq.HeaderAttempt: int64(1)}, Body: body}
	for range b.N {
		if _, err := conn.Publish(ctx, pub); err != nil {
			b.Fatal(err)
		}
	}
	var handled atomic.Int64
	done := make(chan struct{})
	n := int64(b.N)
	mux := acemq.NewMux()
	mux.Use(middleware.Decode(codec.JSON), middleware.MaxAge(time.Hour), middleware.Recover())
	mux.HandleFunc("bench", func(context.Context, *acemq.Message) ack.Ack {
		if handled.Add(1) == n {
			close(done)
		}
		return answer
	})
	srv := &acemq.Server{Transport: conn, Handler: mux, Prefetch: 256, MeterProvider: mp, Logger: zap.NewNop()}
	for _, f := range with {
		f(srv)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(ctx) }()
	<-done
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	srv.Shutdown(ctx)
	if err := <-runErr; err != nil {
		b.Fatal(err)
	}
}
