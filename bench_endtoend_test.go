package acemq_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
)

// BenchmarkPublishServeMemory is the bench module's memory scenario in
// process: acemq.Publisher publishing b.N messages to the memory broker
// while a Server consumes them through the default chain (decode, max age,
// recover) to an accept-all handler. Its allocs/op are allocations per
// message end to end, the publisher's, the broker's and the server's
// together, which BenchmarkServerMemory (publishing before its timer
// starts) leaves out.
func BenchmarkPublishServeMemory(b *testing.B) {
	conn, body := benchQueue(b)
	ctx := context.Background()
	var handled atomic.Int64
	done := make(chan struct{})
	n := int64(b.N)
	mux := acemq.NewMux()
	mux.Use(middleware.Decode(codec.JSON), middleware.MaxAge(time.Hour), middleware.Recover())
	mux.HandleFunc("bench", func(context.Context, *acemq.Message) ack.Ack {
		if handled.Add(1) == n {
			close(done)
		}
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: conn, Handler: mux, Prefetch: 100, Concurrency: 4, Logger: zap.NewNop()}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run(ctx) }()
	select {
	case <-srv.Ready():
	case err := <-runErr:
		b.Fatalf("Run returned before it was ready: %v", err)
	}
	p := &acemq.Publisher{Transport: conn, Mandatory: true}
	o := acemq.Outgoing{RoutingKey: "bench", Body: body, ContentType: "application/json"}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := p.Publish(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	srv.Shutdown(ctx)
	if err := <-runErr; err != nil {
		b.Fatal(err)
	}
}
