package memory_test

import (
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
	"github.com/acemq/acemq/transport/transporttest"
)

// TestConformance runs the suite the amqp transport passes against
// RabbitMQ: one broker per subtest, moved by its virtual clock.
func TestConformance(t *testing.T) {
	var mu sync.Mutex
	brokers := map[testing.TB]*memory.Broker{}
	broker := func(tb testing.TB) *memory.Broker {
		mu.Lock()
		defer mu.Unlock()
		b := brokers[tb]
		if b == nil {
			b = memory.New()
			brokers[tb] = b
			tb.Cleanup(func() {
				_ = b.Close()
				mu.Lock()
				delete(brokers, tb)
				mu.Unlock()
			})
		}
		return b
	}
	transporttest.Run(t, transporttest.Harness{
		New:     func(tb testing.TB) transport.Transport { return broker(tb).Connect() },
		Advance: func(tb testing.TB, d time.Duration) { broker(tb).Clock().Advance(d) },
		Stallable: func(tb testing.TB) transporttest.Stallable {
			b := broker(tb)
			return transporttest.Stallable{Transport: b.Connect(), Stall: b.Stall, Heal: b.Unstall}
		},
	})
}
