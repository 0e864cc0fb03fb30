// Package metrictest reads what an OpenTelemetry SDK meter provider
// recorded, for the project's own tests: a counter's total, a histogram's
// count and sum, a gauge's value, each by instrument name and attributes,
// and a wait for a counter to reach a number. It is the one reader of
// metricdata.ResourceMetrics in the tests, so that a test says which
// number it expects rather than walking scopes and data points again.
//
// # Attributes
//
// A point matches attrs when its attributes include every pair of attrs
// (a subset match, not an exact one); nil or an empty map matches every
// point. Subset, because a test asserts on the attribute it is about (the
// outcome, the rung) while the instruments add others (the queue, the
// kind) it need not spell out. A value is compared as the attribute
// prints (attribute.Value.Emit): a string as it is, a bool as true or
// false, a number in decimal. SumEvery checks instead that no point
// strays (every point of queue "orders").
package metrictest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/acemq/acemq/internal/polltest"
)

// New returns a meter provider that records into a manual reader, for a
// component under test, and the reader to read it with; the provider is
// shut down when the test ends.
func New(tb testing.TB) (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	tb.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	tb.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp, r
}

// Collect reads everything r holds now, failing the test if it cannot.
func Collect(tb testing.TB, r sdkmetric.Reader) metricdata.ResourceMetrics {
	tb.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		tb.Fatalf("metrictest: collect: %v", err)
	}
	return rm
}

// Sum is the total of the int64 counter name over its points that match
// attrs; 0 when nothing was counted. It fails the test when name is an
// instrument of another kind, so that a histogram's name is not read as
// a counter that never moved.
func Sum(tb testing.TB, r sdkmetric.Reader, name string, attrs map[string]string) int64 {
	tb.Helper()
	total, _ := sums(tb, data(tb, r, name), name, attrs)
	return total
}

// sums is the total of the counter name's points in one collection that
// match attrs, and the total of all of them.
func sums(tb testing.TB, ds []metricdata.Aggregation, name string, attrs map[string]string) (matched, all int64) {
	tb.Helper()
	for _, d := range ds {
		sum, ok := d.(metricdata.Sum[int64])
		if !ok {
			tb.Fatalf("metrictest: %s is a %T, not an int64 counter", name, d)
		}
		for _, p := range sum.DataPoints {
			all += p.Value
			if matches(p.Attributes, attrs) {
				matched += p.Value
			}
		}
	}
	return matched, all
}

// SumEvery is the total of the int64 counter name over all its points,
// failing the test (Errorf) when a point does not match attrs: for an
// instrument whose every count must carry them, a middleware on one queue
// that must not count under another.
func SumEvery(tb testing.TB, r sdkmetric.Reader, name string, attrs map[string]string) int64 {
	tb.Helper()
	matched, all := sums(tb, data(tb, r, name), name, attrs) // one collection: the counts go on meanwhile
	if matched != all {
		tb.Errorf("metrictest: %s counted %d, of which %d without %v", name, all, all-matched, attrs)
	}
	return all
}

// Histogram is the count and sum of the float64 histogram name over its
// points that match attrs. It fails the test when name is an instrument of
// another kind.
func Histogram(tb testing.TB, r sdkmetric.Reader, name string, attrs map[string]string) (count uint64, sum float64) {
	tb.Helper()
	for _, d := range data(tb, r, name) {
		h, ok := d.(metricdata.Histogram[float64])
		if !ok {
			tb.Fatalf("metrictest: %s is a %T, not a float64 histogram", name, d)
		}
		for _, p := range h.DataPoints {
			if matches(p.Attributes, attrs) {
				count, sum = count+p.Count, sum+p.Sum
			}
		}
	}
	return count, sum
}

// Gauge is the value of the gauge name (int64 or float64) at its one point
// that matches attrs, and whether there is one: an asynchronous gauge
// reports only while its callback is registered. It fails the test when
// more than one point matches, since which one to read would be a guess,
// or when name is an instrument of another kind.
func Gauge(tb testing.TB, r sdkmetric.Reader, name string, attrs map[string]string) (float64, bool) {
	tb.Helper()
	var values []float64
	for _, d := range data(tb, r, name) {
		switch g := d.(type) {
		case metricdata.Gauge[int64]:
			for _, p := range g.DataPoints {
				if matches(p.Attributes, attrs) {
					values = append(values, float64(p.Value))
				}
			}
		case metricdata.Gauge[float64]:
			for _, p := range g.DataPoints {
				if matches(p.Attributes, attrs) {
					values = append(values, p.Value)
				}
			}
		default:
			tb.Fatalf("metrictest: %s is a %T, not a gauge", name, d)
		}
	}
	switch len(values) {
	case 0:
		return 0, false
	case 1:
		return values[0], true
	}
	tb.Fatalf("metrictest: %d points of %s match %v, want at most one: %v", len(values), name, attrs, values)
	return 0, false
}

// CounterReaches waits until the counter name over attrs reaches want,
// then checks it went no further. A component records some counts after
// the event a test can see (a settlement's metrics come as its original is
// settled, after its copy was confirmed and even handled), so reading the
// counter the moment the event is seen races with it. It polls within
// polltest.Generous and fails the test with the last total it saw.
func CounterReaches(tb testing.TB, r sdkmetric.Reader, name string, attrs map[string]string, want int64) {
	tb.Helper()
	var got int64
	if !polltest.Until(polltest.Generous, func() bool { got = Sum(tb, r, name, attrs); return got >= want }) {
		tb.Fatalf("metrictest: %s%v = %d after %s, want it to reach %d", name, attrs, got, polltest.Generous, want)
	}
	if got = Sum(tb, r, name, attrs); got != want {
		tb.Errorf("metrictest: %s%v = %d, want %d", name, attrs, got, want)
	}
}

// data is every aggregation recorded under name, from any scope.
func data(tb testing.TB, r sdkmetric.Reader, name string) []metricdata.Aggregation {
	tb.Helper()
	rm := Collect(tb, r)
	var out []metricdata.Aggregation
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				out = append(out, m.Data)
			}
		}
	}
	return out
}

// matches reports whether set includes every pair of attrs.
func matches(set attribute.Set, attrs map[string]string) bool {
	for k, want := range attrs {
		if v, ok := set.Value(attribute.Key(k)); !ok || v.Emit() != want {
			return false
		}
	}
	return true
}
