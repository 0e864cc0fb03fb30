package rabbitmq

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/transporttest"
)

// TestConnectionLimit runs the suite's connection-limit case on a vhost of
// its own: set_vhost_limits '{"max-connections": 0}' and
// close_all_connections make every reconnect refused with RabbitMQ's 530
// "connection limit (0) is reached", which the subscription waits out.
func TestConnectionLimit(t *testing.T) {
	t.Parallel()
	url, vh := brokertest.FreshVhost(t, "", brokerURL(t))
	transporttest.ConnectionLimit(t, transporttest.Harness{
		New:     func(tb testing.TB) transport.Transport { return dialURL(tb, url) },
		Advance: func(_ testing.TB, d time.Duration) { time.Sleep(d) },
	}, transporttest.ConnectionLimiter{
		Limit: func(tb testing.TB, n int) {
			brokertest.Ctl(tb, "", "set_vhost_limits", "-p", vh, fmt.Sprintf(`{"max-connections": %d}`, n))
		},
		CloseAll: func(tb testing.TB) {
			brokertest.Ctl(tb, "", "close_all_connections", "-p", vh, "acemq test: connection limit")
		},
	})
}

// TestConsumeRefusedForNow: a Consume whose own connection the broker
// refuses at once (the vhost at its max-connections) fails with a
// transport.RefusedError in the broker's words, for the caller to try
// again, not with ErrAccessRefused.
func TestConsumeRefusedForNow(t *testing.T) {
	t.Parallel()
	url, vh := brokertest.FreshVhost(t, "", brokerURL(t))
	tr := dialURL(t, url)
	q, _ := declareAndConsume(t, tr)
	brokertest.Ctl(t, "", "set_vhost_limits", "-p", vh, `{"max-connections": 0}`)
	_, err := tr.Consume(testCtx(t, 30*time.Second), q, transport.ConsumeOptions{})
	var re *transport.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, transport.ErrRefused) || errors.Is(err, transport.ErrAccessRefused) {
		t.Fatalf("Consume at the limit = %v, want a RefusedError (ErrRefused, not ErrAccessRefused)", err)
	}
	if re.Cause != "connection_limit" {
		t.Errorf("cause %q, want connection_limit (%v)", re.Cause, err)
	}
}
