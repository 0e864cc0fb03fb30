package metrictest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/internal/tbtest"
)

func TestSumMatchesASubsetOfTheAttributes(t *testing.T) {
	t.Parallel()
	mp, r := metrictest.New(t)
	c, err := mp.Meter("test").Int64Counter("handled")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c.Add(ctx, 2, metric.WithAttributes(attribute.String("queue", "orders"), attribute.String("outcome", "accept")))
	c.Add(ctx, 3, metric.WithAttributes(attribute.String("queue", "orders"), attribute.String("outcome", "retry")))
	c.Add(ctx, 5, metric.WithAttributes(attribute.String("queue", "bills"), attribute.String("outcome", "accept"), attribute.Bool("dropped", true)))
	for _, tt := range []struct {
		attrs map[string]string
		want  int64
	}{
		{nil, 10},
		{map[string]string{}, 10},
		{map[string]string{"queue": "orders"}, 5},
		{map[string]string{"outcome": "accept"}, 7},
		{map[string]string{"queue": "orders", "outcome": "accept"}, 2},
		{map[string]string{"queue": "orders", "outcome": "park"}, 0},
		{map[string]string{"dropped": "true"}, 5},
		{map[string]string{"absent": ""}, 0},
	} {
		if got := metrictest.Sum(t, r, "handled", tt.attrs); got != tt.want {
			t.Errorf("Sum(handled, %v) = %d, want %d", tt.attrs, got, tt.want)
		}
	}
	if got := metrictest.Sum(t, r, "never-recorded", nil); got != 0 {
		t.Errorf("Sum of an instrument never recorded = %d, want 0", got)
	}
}

func TestSumEveryFailsOnAStrayPoint(t *testing.T) {
	t.Parallel()
	mp, r := metrictest.New(t)
	c, err := mp.Meter("test").Int64Counter("duplicates")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 2, metric.WithAttributes(attribute.String("queue", "orders")))
	orders := map[string]string{"queue": "orders"}
	if failed := tbtest.Failure(t, func(tb testing.TB) {
		if got := metrictest.SumEvery(tb, r, "duplicates", orders); got != 2 {
			tb.Errorf("SumEvery = %d, want 2", got)
		}
	}); failed != "" {
		t.Fatalf("SumEvery with every point of orders: %s", failed)
	}
	c.Add(context.Background(), 1, metric.WithAttributes(attribute.String("queue", "bills")))
	if failed := tbtest.Failure(t, func(tb testing.TB) { metrictest.SumEvery(tb, r, "duplicates", orders) }); !strings.Contains(failed, "counted 3, of which 1 without") {
		t.Errorf("SumEvery with a point of bills failed with %q, want it to say one strays", failed)
	}
}

func TestHistogram(t *testing.T) {
	t.Parallel()
	mp, r := metrictest.New(t)
	h, err := mp.Meter("test").Float64Histogram("duration")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h.Record(ctx, 0.5, metric.WithAttributes(attribute.String("outcome", "accept")))
	h.Record(ctx, 1.5, metric.WithAttributes(attribute.String("outcome", "accept")))
	h.Record(ctx, 4, metric.WithAttributes(attribute.String("outcome", "retry")))
	if n, sum := metrictest.Histogram(t, r, "duration", map[string]string{"outcome": "accept"}); n != 2 || sum != 2 {
		t.Errorf("Histogram(duration, accept) = %d, %v; want 2, 2", n, sum)
	}
	if n, sum := metrictest.Histogram(t, r, "duration", nil); n != 3 || sum != 6 {
		t.Errorf("Histogram(duration) = %d, %v; want 3, 6", n, sum)
	}
}

func TestGauge(t *testing.T) {
	t.Parallel()
	mp, r := metrictest.New(t)
	m := mp.Meter("test")
	pending, err := m.Int64ObservableGauge("pending")
	if err != nil {
		t.Fatal(err)
	}
	age, err := m.Float64ObservableGauge("age")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(pending, 2, metric.WithAttributes(attribute.String("queue", "a")))
		o.ObserveInt64(pending, 7, metric.WithAttributes(attribute.String("queue", "b")))
		o.ObserveFloat64(age, 1.25)
		return nil
	}, pending, age); err != nil {
		t.Fatal(err)
	}
	if v, ok := metrictest.Gauge(t, r, "pending", map[string]string{"queue": "b"}); !ok || v != 7 {
		t.Errorf("Gauge(pending, b) = %v, %v; want 7, true", v, ok)
	}
	if v, ok := metrictest.Gauge(t, r, "age", nil); !ok || v != 1.25 {
		t.Errorf("Gauge(age) = %v, %v; want 1.25, true", v, ok)
	}
	if _, ok := metrictest.Gauge(t, r, "pending", map[string]string{"queue": "c"}); ok {
		t.Error("Gauge found a point for a queue never observed")
	}
	if failed := tbtest.Failure(t, func(tb testing.TB) { metrictest.Gauge(tb, r, "pending", nil) }); !strings.Contains(failed, "2 points of pending") {
		t.Errorf("Gauge over two matching points failed with %q, want it to refuse to guess", failed)
	}
}

func TestAnotherKindFails(t *testing.T) {
	t.Parallel()
	mp, r := metrictest.New(t)
	h, err := mp.Meter("test").Float64Histogram("duration")
	if err != nil {
		t.Fatal(err)
	}
	h.Record(context.Background(), 1)
	if failed := tbtest.Failure(t, func(tb testing.TB) { metrictest.Sum(tb, r, "duration", nil) }); !strings.Contains(failed, "not an int64 counter") {
		t.Errorf("Sum of a histogram failed with %q, want it to say it is no counter", failed)
	}
}

func TestCounterReaches(t *testing.T) {
	t.Parallel()
	mp, r := metrictest.New(t)
	c, err := mp.Meter("test").Int64Counter("retries")
	if err != nil {
		t.Fatal(err)
	}
	attrs := metric.WithAttributes(attribute.String("where", "broker"))
	go func() {
		for range 3 {
			time.Sleep(time.Millisecond)
			c.Add(context.Background(), 1, attrs)
		}
	}()
	if failed := tbtest.Failure(t, func(tb testing.TB) {
		metrictest.CounterReaches(tb, r, "retries", map[string]string{"where": "broker"}, 3)
	}); failed != "" {
		t.Fatalf("CounterReaches failed for a counter that reached 3: %s", failed)
	}
	c.Add(context.Background(), 1, attrs)
	if failed := tbtest.Failure(t, func(tb testing.TB) {
		metrictest.CounterReaches(tb, r, "retries", map[string]string{"where": "broker"}, 3)
	}); !strings.Contains(failed, "= 4, want 3") {
		t.Errorf("CounterReaches past the number failed with %q, want it to say it went further", failed)
	}
}
