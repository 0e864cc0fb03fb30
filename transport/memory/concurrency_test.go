package memory_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// TestConcurrentUse: publishers, competing consumers that requeue some
// deliveries, and a clock moving under them; every message is acked
// exactly once and nothing is left. Run with -race.
func TestConcurrentUse(t *testing.T) {
	f := setup(t)
	rung := f.rung("work")
	const publishers, perPublisher, consumers = 4, 500, 3
	total := publishers * perPublisher

	var acked atomic.Int64
	seen := make([]atomic.Int32, total)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for range consumers {
		conn := f.b.Connect()
		defer conn.Close()
		sub, err := conn.Consume(ctx, "work", transport.ConsumeOptions{Prefetch: 16})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer sub.Close()
			for acked.Load() < int64(total) {
				select {
				case d := <-sub.Deliveries():
					var i int
					fmt.Sscan(string(d.Body), &i)
					if !d.Redelivered && i%7 == 0 {
						_ = d.Reject(true)
						continue
					}
					if err := d.Ack(); err != nil {
						t.Errorf("Ack: %v", err)
					}
					seen[i].Add(1)
					if acked.Add(1) == int64(total) {
						once.Do(func() { close(done) })
					}
				case <-done:
					return
				case <-ctx.Done():
					return
				}
			}
		})
	}
	for p := range publishers {
		wg.Go(func() {
			conn := f.b.Connect()
			defer conn.Close()
			for i := range perPublisher {
				n := p*perPublisher + i
				q := "work"
				if n%5 == 0 {
					q = rung // comes home when the clock moves
				}
				if _, err := conn.Publish(ctx, transport.Publishing{RoutingKey: q, Body: []byte(fmt.Sprint(n))}); err != nil {
					t.Errorf("Publish: %v", err)
				}
			}
		})
	}
	wg.Go(func() {
		for acked.Load() < int64(total) && ctx.Err() == nil {
			f.b.Clock().Advance(10 * time.Second)
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()

	if got := acked.Load(); got != int64(total) {
		t.Fatalf("acked %d of %d", got, total)
	}
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Fatalf("message %d acked %d times", i, n)
		}
	}
	if f.b.Depth("work")+f.b.Depth(rung)+f.b.Unacked("work") != 0 {
		t.Fatal("messages left over")
	}
}
