package rabbitmq

import (
	"crypto/tls"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestOptions(t *testing.T) {
	t.Parallel()
	c := defaultConfig("amqp://a")
	if c.channels != DefaultPublishChannels || c.inFlight != DefaultInFlight || c.confirmTimeout != DefaultConfirmTimeout || c.logger == nil {
		t.Fatalf("defaults = %+v", c)
	}
	tc := &tls.Config{ServerName: "x"}
	l := zap.NewExample()
	for _, o := range []Option{
		WithURLs("amqp://b", "amqp://c"), WithConnectionName("svc"), WithTLS(tc), WithLogger(l),
		WithBackoff(time.Second, time.Minute), WithHeartbeat(3 * time.Second), WithDialTimeout(time.Second),
		WithPublishChannels(2), WithInFlight(9), WithConfirmTimeout(time.Minute),
		// Nonsense values keep the defaults.
		WithLogger(nil), WithPublishChannels(0), WithInFlight(-1), WithConfirmTimeout(0), WithDialTimeout(0),
	} {
		o.apply(&c)
	}
	if len(c.urls) != 3 || c.urls[2] != "amqp://c" || c.name != "svc" || c.tls != tc || c.logger != l ||
		c.backoff.Min != time.Second || c.backoff.Max != time.Minute || c.heartbeat != 3*time.Second ||
		c.dialTimeout != time.Second || c.channels != 2 || c.inFlight != 9 || c.confirmTimeout != time.Minute {
		t.Fatalf("options not applied: %+v", c)
	}
}
