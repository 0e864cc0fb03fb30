package acemq

import (
	"go.opentelemetry.io/otel/propagation"

	"github.com/acemq/acemq/internal/wire"
)

// HeaderCarrier lets OpenTelemetry propagators read and write trace context
// in message headers.
type HeaderCarrier map[string]any

// Get returns the header's value as a string; other types read as "".
func (c HeaderCarrier) Get(key string) string {
	s, _ := wire.String(c[key])
	return s
}

// Set sets a string header.
func (c HeaderCarrier) Set(key, value string) { c[key] = value }

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

var _ propagation.TextMapCarrier = HeaderCarrier(nil)
