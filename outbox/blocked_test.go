package outbox_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport"
)

// blocking is a transport under a broker alarm while blocked is set.
type blocking struct {
	transport.Transport
	blocked atomic.Bool
	refused atomic.Int32
}

func (b *blocking) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	if b.blocked.Load() {
		b.refused.Add(1)
		return transport.Confirmation{}, fmt.Errorf("acemq: publish: %w (memory alarm)", transport.ErrBlocked)
	}
	return b.Transport.Publish(ctx, p)
}

// A blocked broker is the relay's trouble, not the messages': rows keep
// their attempts, and the relay as a whole waits and tries again.
func TestBlockedBrokerLeavesRowsAlone(t *testing.T) {
	t.Parallel()
	f := setup(t, brokers(t)[0])
	c := collect(t, f.tr, f.queue)
	bt := &blocking{Transport: f.tr}
	bt.blocked.Store(true)
	stop := run(t, newRelay(t, f.o, bt, fast, outbox.WithPollInterval(50*time.Millisecond)))
	ids := write(t, f.pool, f.o, outbox.Message{Queue: f.queue, Body: []byte("a")}, outbox.Message{Queue: f.queue, Body: []byte("b")})
	waitFor(t, 10*time.Second, "the relay did not try again while blocked", func() bool { return bt.refused.Load() >= 6 })
	for _, id := range ids {
		if n, last, ok := f.attemptsOf(t, id); !ok || n != 0 || last != "" {
			t.Errorf("row %s while blocked: present %v, attempts %d, last error %q; want it untouched", id, ok, n, last)
		}
	}
	bt.blocked.Store(false)
	c.wait(t, 2, 10*time.Second)
	f.waitEmpty(t, 5*time.Second)
	if err := stop(); err != nil {
		t.Fatalf("Run = %v; a blocked broker must not stop it", err)
	}
}
