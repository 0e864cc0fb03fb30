package outbox_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/outbox"
)

func TestMetricsAndLogs(t *testing.T) {
	t.Parallel()
	f := setup(t, brokers(t)[0])
	c := collect(t, f.tr, f.queue)
	mp, reader := metrictest.New(t)
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
	polltest.Eventually(t, "the unroutable message recorded", func() bool {
		s, err := f.o.Stats(context.Background())
		return err == nil && s.Pending == 1 && s.Failing == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	for name, want := range map[string]int64{outbox.MetricPublished: 3, outbox.MetricUnroutable: 1} {
		if got := metrictest.Sum(t, reader, name, nil); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if n, _ := metrictest.Histogram(t, reader, outbox.MetricLag, nil); n != 3 {
		t.Errorf("%s counted %d, want 3", outbox.MetricLag, n)
	}
	// The gauges' callback is unregistered once Run returned: they are
	// reported only while a relay runs.
	if v, ok := metrictest.Gauge(t, reader, outbox.MetricPending, nil); ok {
		t.Errorf("%s = %v after Run returned, want it no longer reported", outbox.MetricPending, v)
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
	mp, reader := metrictest.New(t)
	write(t, f.pool, f.o, outbox.Message{Queue: f.queue + ".nowhere", Body: []byte("x")}, outbox.Message{Queue: f.queue + ".nowhere"})
	stop := run(t, newRelay(t, f.o, f.tr, outbox.WithMeterProvider(mp), outbox.WithBackoff(time.Hour, time.Hour)))
	var age float64
	polltest.Eventually(t, "a pending gauge of 2", func() bool {
		pending, _ := metrictest.Gauge(t, reader, outbox.MetricPending, nil)
		age, _ = metrictest.Gauge(t, reader, outbox.MetricOldestAge, nil)
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
