package middleware

import (
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
)

// Option is a setting that every middleware here that has settings reads
// the same way, by the names and types the rest of acemq gives them
// (docs/internals.md, "Settings"): [WithLogger] and [WithMeterProvider]. [Recover] and
// [Logging] read the logger; [Idempotent] reads both, and takes settings
// of its own beside them ([IdempotentOption]). The interface is sealed. A
// nil Option is skipped, so Recover(nil), from when the logger was an
// argument, still means the default.
type Option interface {
	IdempotentOption
	apply(*settings)
}

// settings are what the shared options set.
type settings struct {
	log *zap.Logger          // nil: warnings and errors to slog.Default()
	mp  metric.MeterProvider // nil: the global one, otel.GetMeterProvider
}

type settingFunc func(*settings)

func (f settingFunc) apply(s *settings)                   { f(s) }
func (f settingFunc) applyIdempotent(c *idempotentConfig) { f(&c.settings) }

// WithLogger sets where a middleware logs; acemq.FromSlog makes one of a
// *slog.Logger. Without it, or with nil, warnings and errors go to
// slog.Default(); zap.NewNop() logs nothing.
func WithLogger(l *zap.Logger) Option {
	return settingFunc(func(s *settings) { s.log = l })
}

// WithMeterProvider sets where a middleware's metrics go (those of
// [Idempotent]: [MetricDuplicates], [MetricInProgress]); without it, or
// with nil, the global provider (otel.GetMeterProvider), as the server's
// metrics do.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return settingFunc(func(s *settings) { s.mp = mp })
}

// settingsOf applies opts in order, skipping nil ones.
func settingsOf(opts []Option) settings {
	var s settings
	for _, o := range opts {
		if o != nil {
			o.apply(&s)
		}
	}
	return s
}
