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
		// A private node to stop (SIGSTOP), given to the case alone.
		Stallable: func(tb testing.TB) transporttest.Stallable {
			node := privateNode(tb)
			node.Acquire(tb)
			url, _ := node.FreshVhost(tb)
			return transporttest.Stallable{
				Transport: dialURL(tb, url, WithStallAfter(500*time.Millisecond), WithHeartbeat(time.Minute)),
				Stall:     func() { node.Freeze(tb) },
				Heal:      func() { node.Thaw(tb) },
			}
		},
	})
}
