package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/transport"
)

// blocking is a transport that refuses every publish unsent with refusal
// while blocked is set: a broker's alarm, or a stalled broker.
type blocking struct {
	transport.Transport
	refusal error
	blocked atomic.Bool
	refused atomic.Int32
}

func (b *blocking) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	if b.blocked.Load() {
		b.refused.Add(1)
		return transport.Confirmation{}, fmt.Errorf("acemq: publish: not sent: %w", b.refusal)
	}
	return b.Transport.Publish(ctx, p)
}

// A blocked or stalled broker is the relay's trouble, not the messages':
// nothing was sent, so rows keep their attempts, and the relay as a whole
// waits and tries again.
func TestBlockedBrokerLeavesRowsAlone(t *testing.T) {
	t.Parallel()
	for _, refusal := range []error{transport.ErrBlocked, transport.ErrStalled} {
		t.Run(refusal.Error(), func(t *testing.T) {
			t.Parallel()
			f := setup(t, brokers(t)[0])
			c := collect(t, f.tr, f.queue)
			bt := &blocking{Transport: f.tr, refusal: refusal}
			bt.blocked.Store(true)
			stop := run(t, newRelay(t, f.o, bt, fast, outbox.WithPollInterval(50*time.Millisecond)))
			ids := write(t, f.pool, f.o, outbox.Message{Queue: f.queue, Body: []byte("a")}, outbox.Message{Queue: f.queue, Body: []byte("b")})
			polltest.Eventually(t, "the relay tried again while refused", func() bool { return bt.refused.Load() >= 6 })
			for _, id := range ids {
				if n, last, ok := f.attemptsOf(t, id); !ok || n != 0 || last != "" {
					t.Errorf("row %s while refused: present %v, attempts %d, last error %q; want it untouched", id, ok, n, last)
				}
			}
			bt.blocked.Store(false)
			c.wait(t, 2, 10*time.Second)
			f.waitEmpty(t, 5*time.Second)
			if err := stop(); err != nil {
				t.Fatalf("Run = %v; a refusing broker must not stop it", err)
			}
		})
	}
}

func TestRunStopsWhenItCannotGoOn(t *testing.T) {
	t.Parallel()
	pool := brokertest.PostgresPool(t, brokertest.PoolConfig{MaxConns: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("missing table", func(t *testing.T) {
		o, err := outbox.New(pool, outbox.WithTable(uniq("no_such_outbox")))
		if err != nil {
			t.Fatal(err)
		}
		mem := brokers(t)[0].connect(t)
		err = newRelay(t, o, mem).Run(ctx)
		if err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("Run = %v, want the missing table", err)
		}
	})
	t.Run("closed transport", func(t *testing.T) {
		o := newOutbox(t, pool)
		tr := brokers(t)[0].connect(t)
		q := uniq("q")
		write(t, pool, o, outbox.Message{Queue: q, Body: []byte("x")})
		_ = tr.Close()
		if err := newRelay(t, o, tr).Run(ctx); !errors.Is(err, transport.ErrClosed) {
			t.Errorf("Run = %v, want transport.ErrClosed", err)
		}
		var attempts int
		if err := pool.QueryRow(ctx, "SELECT attempts FROM "+o.Table()).Scan(&attempts); err != nil || attempts != 0 {
			t.Errorf("the row: attempts %d, %v; want it kept, untouched", attempts, err)
		}
	})
}
