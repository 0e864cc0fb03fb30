package memory_test

import (
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
	"github.com/acemq/acemq/transport/transporttest"
)

// TestConsumerTimeoutReportedConformance runs the suite's case on the
// report of a consumer timeout, which transport/amqp passes on a RabbitMQ
// node with a low consumer_timeout.
func TestConsumerTimeoutReportedConformance(t *testing.T) {
	t.Parallel()
	const timeout = 30 * time.Second
	b := memory.New(memory.WithConsumerTimeout(timeout))
	t.Cleanup(func() { _ = b.Close() })
	transporttest.ConsumerTimeoutReported(t, transporttest.Harness{ // one case, one tb: one broker
		New:     func(testing.TB) transport.Transport { return b.Connect() },
		Advance: func(_ testing.TB, d time.Duration) { b.Clock().Advance(d) },
	}, timeout)
}
