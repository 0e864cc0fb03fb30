package outbox_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq/outbox"
)

func TestMetricsAndLogs(t *testing.T) {
	t.Parallel()
	f := setup(t, brokers(t)[0])
	c := collect(t, f.tr, f.queue)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	core, logs := observer.New(zap.WarnLevel)

	stop := run(t, newRelay(t, f.o, f.tr, outbox.WithMeterProvider(mp), outbox.WithLogger(zap.New(core)),
		outbox.WithBackoff(time.Hour, time.Hour)))
	write(t, f.pool, f.o,
		outbox.Message{Queue: f.queue, Body: []byte("1")},
		outbox.Message{Queue: f.queue, Body: []byte("2")},
		outbox.Message{Queue: f.queue, Body: []byte("3")},
		outbox.Message{Queue: f.queue + ".nowhere", Body: []byte("4")},
	)
	c.wait(t, 3, 10*time.Second)
	waitFor(t, 10*time.Second, "the unroutable message was not recorded", func() bool {
		s, err := f.o.Stats(context.Background())
		return err == nil && s.Pending == 1 && s.Failing == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name] += float64(p.Count)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] = float64(p.Value)
				}
			}
		}
	}
	// The gauges' callback is unregistered once Run returned: they are
	// reported only while a relay runs.
	for name, want := range map[string]float64{
		outbox.MetricPublished:  3,
		outbox.MetricUnroutable: 1,
		outbox.MetricLag:        3,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], want, got)
		}
	}
	warned := logs.FilterMessage("outbox message not published; it stays and will be retried").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings for the unroutable message, want 1: %v", len(warned), logs.All())
	}
	if fields := warned[0].ContextMap(); fields["routing_key"] != f.queue+".nowhere" || fields["attempts"] != int32(1) {
		t.Errorf("warning fields %v", fields)
	}
}

func TestPendingGaugeWhileRunning(t *testing.T) {
	t.Parallel()
	f := setup(t, brokers(t)[0])
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	write(t, f.pool, f.o, outbox.Message{Queue: f.queue + ".nowhere", Body: []byte("x")}, outbox.Message{Queue: f.queue + ".nowhere"})
	stop := run(t, newRelay(t, f.o, f.tr, outbox.WithMeterProvider(mp), outbox.WithBackoff(time.Hour, time.Hour)))
	var pending int64
	var age float64
	waitFor(t, 10*time.Second, "no pending gauge", func() bool {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Gauge[int64]:
					if m.Name == outbox.MetricPending && len(d.DataPoints) == 1 {
						pending = d.DataPoints[0].Value
					}
				case metricdata.Gauge[float64]:
					if m.Name == outbox.MetricOldestAge && len(d.DataPoints) == 1 {
						age = d.DataPoints[0].Value
					}
				}
			}
		}
		return pending == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if age < 0 || age > 60 {
		t.Errorf("oldest age %v s", age)
	}
}

func TestLargeBodies(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker) {
		f := setup(t, b)
		c := collect(t, f.tr, f.queue)
		var msgs []outbox.Message
		var bodies [][]byte
		for i, size := range []int{0, 10, 64 << 10, 64<<10 + 1, 300 << 10, 1 << 20, 5} {
			body := bytes.Repeat([]byte{byte('a' + i)}, size)
			bodies = append(bodies, body)
			msgs = append(msgs, outbox.Message{Queue: f.queue, Body: body})
		}
		write(t, f.pool, f.o, msgs...)
		stop := run(t, newRelay(t, f.o, f.tr, outbox.WithConcurrency(1)))
		got := c.wait(t, len(msgs), 20*time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		for i, d := range got {
			if !bytes.Equal(d.Body, bodies[i]) {
				t.Errorf("message %d: body of %d bytes, want %d", i, len(d.Body), len(bodies[i]))
			}
		}
	})
}
