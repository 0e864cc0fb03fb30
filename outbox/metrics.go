package outbox

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/acemq/acemq/internal/telemetry"
)

// The relay's metric names.
const (
	MetricPending    = "acemq.outbox.pending"
	MetricOldestAge  = "acemq.outbox.oldest.age"
	MetricPublished  = "acemq.outbox.published"
	MetricUnroutable = "acemq.outbox.unroutable"
	MetricFailed     = "acemq.outbox.publish.failed"
	MetricLag        = "acemq.outbox.relay.lag"
)

// meterName is the instrumentation scope of the relay's instruments.
const meterName = "github.com/acemq/acemq/outbox"

// statsTimeout bounds the query behind the observable gauges.
const statsTimeout = 5 * time.Second

type instruments struct {
	meter      metric.Meter
	pending    metric.Int64ObservableGauge
	oldest     metric.Float64ObservableGauge
	published  metric.Int64Counter
	unroutable metric.Int64Counter
	failed     metric.Int64Counter
	lag        metric.Float64Histogram
	// attribute sets, built once: the table, and the table with a reason.
	add                        metric.AddOption
	record                     metric.RecordOption
	observeOpt                 metric.ObserveOption
	nacked, unconfirmed, other metric.AddOption
	kept, dropped              metric.AddOption // unroutable: the row stays, or WithUnroutableOK deleted it
}

// newInstruments makes the relay's instruments from mp, or from the global
// meter provider when mp is nil.
func newInstruments(mp metric.MeterProvider, table string) *instruments {
	m := telemetry.MeterProvider(mp).Meter(meterName, metric.WithSchemaURL(telemetry.SchemaURL))
	in := &instruments{meter: m}
	// Creation fails only on an invalid name; ours are constants, and a
	// failed instrument is a no-op one.
	in.pending, _ = m.Int64ObservableGauge(MetricPending, metric.WithUnit("{message}"),
		metric.WithDescription("Rows in the outbox table not yet published, those waiting out a backoff included."))
	in.oldest, _ = m.Float64ObservableGauge(MetricOldestAge, metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest row not yet published: how far behind the relays are."))
	in.published, _ = m.Int64Counter(MetricPublished, metric.WithUnit("{message}"),
		metric.WithDescription("Messages confirmed (and routed, or to an exchange of WithUnroutableOK) by the broker and deleted from the outbox."))
	in.unroutable, _ = m.Int64Counter(MetricUnroutable, metric.WithUnit("{message}"),
		metric.WithDescription("Publishes that reached no queue: dropped=false, the row stays and is retried; dropped=true, to an exchange of WithUnroutableOK, the row is deleted."))
	in.failed, _ = m.Int64Counter(MetricFailed, metric.WithUnit("{message}"),
		metric.WithDescription("Publishes nacked, unconfirmed or refused, by reason; the row stays and is retried."))
	in.lag, _ = m.Float64Histogram(MetricLag, metric.WithUnit("s"),
		metric.WithDescription("Time from a row's transaction to the broker's confirm of its message."))
	t := attribute.String("table", table)
	set := metric.WithAttributeSet(attribute.NewSet(t))
	in.add, in.record, in.observeOpt = set, set, set
	reason := func(r string) metric.AddOption {
		return metric.WithAttributeSet(attribute.NewSet(t, attribute.String("reason", r)))
	}
	in.nacked, in.unconfirmed, in.other = reason("nacked"), reason("unconfirmed"), reason("error")
	dropped := func(b bool) metric.AddOption {
		return metric.WithAttributeSet(attribute.NewSet(t, attribute.Bool("dropped", b)))
	}
	in.kept, in.dropped = dropped(false), dropped(true)
	return in
}

// observe registers the gauges' callback, which counts the table when the
// metrics are collected; the caller unregisters it when the relay stops.
func (in *instruments) observe(o *Outbox) (metric.Registration, error) {
	return in.meter.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, statsTimeout)
		defer cancel()
		s, err := o.Stats(ctx)
		if err != nil {
			return err
		}
		obs.ObserveInt64(in.pending, s.Pending, in.observeOpt)
		obs.ObserveFloat64(in.oldest, s.OldestAge.Seconds(), in.observeOpt)
		return nil
	}, in.pending, in.oldest)
}
