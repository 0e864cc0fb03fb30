package rabbitmq

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Benchmarks compare the Transport with plain amqp091-go doing the same
// work in the same run:
//
//	ACEMQ_AMQP_URL=... go test -run '^$' -bench . -benchtime 20000x ./transport/amqp
//
// Publishing: benchPublishers goroutines, benchWindow publishes awaiting a
// confirm at most, benchChannels confirm channels, mandatory, persistent.
const (
	benchPublishers = 64
	benchWindow     = 64
	benchChannels   = 4
	benchPrefetch   = 100
)

var benchBody = make([]byte, 256)

func benchQueue(b *testing.B) string {
	b.Helper()
	q := name(b, "bench")
	if err := withRaw(b, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclare(q, true, false, false, false, nil)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { deleteQueue(b, q) })
	return q
}

// runPublishers splits b.N publishes over benchPublishers goroutines.
func runPublishers(b *testing.B, publish func(ctx context.Context) error) {
	b.Helper()
	var next atomic.Int64
	errs := make(chan error, benchPublishers)
	ctx := context.Background()
	b.ResetTimer()
	for range benchPublishers {
		go func() {
			for next.Add(1) <= int64(b.N) {
				if err := publish(ctx); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range benchPublishers {
		if err := <-errs; err != nil {
			b.Error(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}

func BenchmarkPublishConfirmed(b *testing.B) {
	b.Run("transport", func(b *testing.B) {
		tr := dial(b, WithPublishChannels(benchChannels), WithInFlight(benchWindow))
		q := benchQueue(b)
		p := transport.Publishing{RoutingKey: q, Mandatory: true, Body: benchBody,
			Properties: transport.Properties{DeliveryMode: 2}}
		runPublishers(b, func(ctx context.Context) error {
			conf, err := tr.Publish(ctx, p)
			if err == nil && !conf.Routed {
				err = fmt.Errorf("not routed")
			}
			return err
		})
	})
	b.Run("raw", func(b *testing.B) {
		conn, err := amqp.Dial(brokerURL(b))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		q := benchQueue(b)
		chans := make([]*amqp.Channel, benchChannels)
		for i := range chans {
			if chans[i], err = conn.Channel(); err != nil {
				b.Fatal(err)
			}
			if err := chans[i].Confirm(false); err != nil {
				b.Fatal(err)
			}
		}
		window := make(chan struct{}, benchWindow)
		var rr atomic.Uint64
		msg := amqp.Publishing{DeliveryMode: 2, Body: benchBody}
		runPublishers(b, func(ctx context.Context) error {
			window <- struct{}{}
			defer func() { <-window }()
			ch := chans[rr.Add(1)%benchChannels]
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, true, false, msg)
			if err != nil {
				return err
			}
			if ok, err := dc.WaitContext(ctx); err != nil || !ok {
				return fmt.Errorf("not acked: %v", err)
			}
			return nil
		})
	})
}

// fill puts n messages in q, fast and unconfirmed: only consuming is timed.
func fill(b *testing.B, q string, n int) {
	b.Helper()
	if err := withRaw(b, func(ch *amqp.Channel) error {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		var last *amqp.DeferredConfirmation
		for range n {
			dc, err := ch.PublishWithDeferredConfirm("", q, false, false, amqp.Publishing{Body: benchBody})
			if err != nil {
				return err
			}
			last = dc
		}
		if last != nil {
			last.Wait()
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkConsumeAck(b *testing.B) {
	b.Run("transport", func(b *testing.B) {
		tr := dial(b)
		q := benchQueue(b)
		fill(b, q, b.N)
		b.ResetTimer()
		sub, err := tr.Consume(context.Background(), q, transport.ConsumeOptions{Prefetch: benchPrefetch})
		if err != nil {
			b.Fatal(err)
		}
		defer sub.Close()
		for range b.N {
			select {
			case d := <-sub.Deliveries():
				if err := d.Ack(); err != nil {
					b.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				b.Fatal("stalled")
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	})
	b.Run("raw", func(b *testing.B) {
		q := benchQueue(b)
		fill(b, q, b.N)
		conn, err := amqp.Dial(brokerURL(b))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		b.ResetTimer()
		ch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		if err := ch.Qos(benchPrefetch, 0, false); err != nil {
			b.Fatal(err)
		}
		deliveries, err := ch.Consume(q, "", false, false, false, false, nil)
		if err != nil {
			b.Fatal(err)
		}
		for range b.N {
			select {
			case d := <-deliveries:
				if err := d.Ack(false); err != nil {
					b.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				b.Fatal("stalled")
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	})
}
