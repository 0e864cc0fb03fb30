package outbox_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// BenchmarkRelay compares the relay's throughput with raw confirmed
// publishing through the same kind of transport, with the same number of
// publishes awaiting a confirm, in the same run, and logs the ratio:
//
//	ACEMQ_POSTGRES_URL=... ACEMQ_AMQP_URL=... go test -run '^$' -bench Relay -benchtime 20000x ./outbox
//
// Without ACEMQ_AMQP_URL it runs on the memory transport. raw is
// benchInFlight goroutines publishing mandatory, persistent messages with
// the relay's headers; relay drains b.N rows written beforehand (not
// timed), until the last one is deleted.
func BenchmarkRelay(b *testing.B) {
	const benchInFlight = 64
	body := make([]byte, 256)
	newTransport := func(b *testing.B) (transport.Transport, broker) {
		bs := brokersB(b)
		br := bs[len(bs)-1]
		if br.name == "rabbitmq" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			tr, err := rabbitmq.Dial(ctx, os.Getenv("ACEMQ_AMQP_URL"), rabbitmq.WithInFlight(benchInFlight))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = tr.Close() })
			return tr, br
		}
		return br.connect(b), br
	}
	rates := map[string]float64{}
	var on string

	b.Run("raw", func(b *testing.B) {
		tr, br := newTransport(b)
		on = br.name
		q := uniq("outbox.bench.raw")
		br.declareQueue(b, tr, q)
		var next atomic.Int64
		errs := make(chan error, benchInFlight)
		b.ResetTimer()
		for range benchInFlight {
			go func() {
				for {
					i := next.Add(1)
					if i > int64(b.N) {
						errs <- nil
						return
					}
					c, err := tr.Publish(context.Background(), transport.Publishing{
						RoutingKey: q, Mandatory: true, Body: body,
						Headers: map[string]any{
							acemq.HeaderID: fmt.Sprint(i), acemq.HeaderAttempt: int64(1),
							acemq.HeaderCreated: time.Now().UnixMilli(), acemq.HeaderExchange: "", acemq.HeaderRoutingKey: q,
						},
						Properties: transport.Properties{DeliveryMode: 2, MessageID: fmt.Sprint(i), Timestamp: time.Now()},
					})
					if err == nil && !c.Routed {
						err = fmt.Errorf("not routed")
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for range benchInFlight {
			if err := <-errs; err != nil {
				b.Error(err)
			}
		}
		b.StopTimer()
		rates["raw"] = float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(rates["raw"], "msg/s")
	})

	b.Run("relay", func(b *testing.B) {
		tr, br := newTransport(b)
		pool := postgresPool(b, 8, "")
		o := newOutbox(b, pool)
		q := uniq("outbox.bench.relay")
		br.declareQueue(b, tr, q)
		ctx := context.Background()
		for written := 0; written < b.N; {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				for ; written < b.N; written++ {
					if _, err := o.Write(ctx, tx, outbox.Message{Queue: q, Body: body}); err != nil {
						return err
					}
					if written%1000 == 999 {
						written++
						return nil
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		counted := &counting{Transport: tr}
		r, err := outbox.NewRelay(o, counted, outbox.WithConcurrency(benchInFlight), outbox.WithBatchSize(benchBatch()))
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		stop := run(b, r)
		for counted.n.Load() < int64(b.N) {
			time.Sleep(time.Millisecond)
		}
		for {
			s, err := o.Stats(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if s.Pending == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		if err := stop(); err != nil {
			b.Error(err)
		}
		rates["relay"] = float64(b.N) / b.Elapsed().Seconds()
		b.ReportMetric(rates["relay"], "msg/s")
	})
	if rates["raw"] > 0 && rates["relay"] > 0 {
		b.Logf("%s: relay %.0f msg/s, raw confirmed publishing %.0f msg/s: ratio %.2f", on, rates["relay"], rates["raw"], rates["relay"]/rates["raw"])
	}
}

// counting is a transport that counts routed, confirmed publishes.
type counting struct {
	transport.Transport
	n atomic.Int64
}

func (c *counting) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	conf, err := c.Transport.Publish(ctx, p)
	if err == nil && conf.Routed {
		c.n.Add(1)
	}
	return conf, err
}

func benchBatch() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("BENCH_BATCH"), &n); err != nil {
		return outbox.DefaultBatchSize
	}
	return n
}
