package rabbitmq

import (
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/transporttest"
)

// TestConformance runs the shared transport suite against the broker of
// ACEMQ_AMQP_URL. The suite names its queues uniquely per run, so it shares
// the vhost with the other tests.
func TestConformance(t *testing.T) {
	url := brokerURL(t)
	transporttest.Run(t, transporttest.Harness{
		New: func(tb testing.TB) transport.Transport {
			return dialURL(tb, url)
		},
		Advance: func(_ testing.TB, d time.Duration) { time.Sleep(d) },
	})
}
