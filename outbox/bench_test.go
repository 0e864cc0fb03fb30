package outbox_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// Benchmark settings: publishes awaiting a confirm (the raw publishers and
// the relay's concurrency alike), body size, and rounds of raw-then-relay.
const (
	benchInFlight = 64
	benchRounds   = 3
	minRatioN     = 1000 // the smallest run the ratio counts (not the probing b.N of 1)
)

var benchBody = make([]byte, 256)

// BenchmarkRelay compares the relay's throughput with raw confirmed
// publishing through the same transport settings, with the same number of
// publishes awaiting a confirm, alternating the two in the same run, and
// logs the ratio of their medians:
//
//	ACEMQ_POSTGRES_URL=... ACEMQ_AMQP_URL=... go test -run '^$' -bench Relay -benchtime 20000x -v ./outbox
//
// Without ACEMQ_AMQP_URL it runs on the memory transport. raw is
// benchInFlight goroutines publishing mandatory, persistent messages with
// the relay's headers; relay drains b.N rows written beforehand (not
// timed) until the last one is deleted.
func BenchmarkRelay(b *testing.B) {
	var raws, relays []float64
	var on string
	for range benchRounds {
		b.Run("raw", func(b *testing.B) {
			rate := benchRaw(b, &on)
			if b.N >= minRatioN {
				raws = append(raws, rate)
			}
		})
		b.Run("relay", func(b *testing.B) {
			rate := benchRelay(b)
			if b.N >= minRatioN {
				relays = append(relays, rate)
			}
		})
	}
	if raw, relay := median(raws), median(relays); raw > 0 && relay > 0 {
		var rounds []string
		for i := range min(len(raws), len(relays)) {
			rounds = append(rounds, fmt.Sprintf("%.2f", relays[i]/raws[i]))
		}
		b.Logf("%s: relay %.0f msg/s, raw confirmed publishing %.0f msg/s (medians): ratio %.2f (by round: %s)",
			on, relay, raw, relay/raw, strings.Join(rounds, " "))
	}
}

// benchTransport is RabbitMQ when ACEMQ_AMQP_URL is set, else the memory
// transport.
func benchTransport(b *testing.B) (transport.Transport, broker) {
	bs := brokersB(b)
	br := bs[len(bs)-1]
	if br.name != "rabbitmq" {
		return br.connect(b), br
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr, err := rabbitmq.Dial(ctx, os.Getenv("ACEMQ_AMQP_URL"), rabbitmq.WithInFlight(benchInFlight))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tr.Close() })
	return tr, br
}

func benchRaw(b *testing.B, on *string) float64 {
	tr, br := benchTransport(b)
	*on = br.name
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
				id := fmt.Sprint(i)
				c, err := tr.Publish(context.Background(), transport.Publishing{
					RoutingKey: q, Mandatory: true, Body: benchBody,
					Headers: map[string]any{
						acemq.HeaderID: id, acemq.HeaderAttempt: int64(1), acemq.HeaderCreated: time.Now().UnixMilli(),
						acemq.HeaderExchange: "", acemq.HeaderRoutingKey: q,
					},
					Properties: transport.Properties{DeliveryMode: 2, MessageID: id, Timestamp: time.Now()},
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
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "msg/s")
	return rate
}

func benchRelay(b *testing.B) float64 {
	tr, br := benchTransport(b)
	pool := brokertest.PostgresPool(b, brokertest.PoolConfig{MaxConns: 8})
	o := newOutbox(b, pool)
	q := uniq("outbox.bench.relay")
	br.declareQueue(b, tr, q)
	ctx := context.Background()
	for written := 0; written < b.N; {
		n := min(1000, b.N-written)
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for range n {
				if _, err := o.Write(ctx, tx, outbox.Message{Queue: q, Body: benchBody}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		written += n
	}
	counted := &counting{Transport: tr}
	r, err := outbox.NewRelay(o, counted, outbox.WithConcurrency(benchInFlight))
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
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "msg/s")
	return rate
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
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
