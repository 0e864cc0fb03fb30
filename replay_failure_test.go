package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// TestReplayWithoutAConfirm: an unknown outcome or a nack gives the original
// back and stops; the unknown one may leave a duplicate, never a loss.
func TestReplayWithoutAConfirm(t *testing.T) {
	t.Parallel()
	for _, sentinel := range []error{transport.ErrUnconfirmed, transport.ErrNacked} {
		b := memory.New()
		conn := b.Connect()
		defer conn.Close()
		e := &replayEnv{t: t, tr: conn, q: "orders", rung: time.Minute, depth: b.Depth, tick: b.Clock().Advance, within: replayWithin(t)}
		e.declareQueue()
		e.seed("a", "b")
		e.tr = unsure{conn, fmt.Errorf("%w: channel closed", sentinel)}
		res, err := e.replay(acemq.ReplayOptions{})
		var rerr *acemq.ReplayError
		if !errors.Is(err, sentinel) || !errors.As(err, &rerr) || rerr.ID != "m-1" || res.String() != "moved 0, skipped 0 (error)" {
			t.Fatalf("%v: %v, %v", sentinel, res, err)
		}
		if b.Depth("orders.dlq") != 2 || b.Unacked("orders.dlq") != 0 {
			t.Errorf("%v: the originals are not all back", sentinel)
		}
	}
}

// TestReplayStopsWhenCancelled gives back what it skipped.
func TestReplayStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	b := memory.New()
	conn := b.Connect()
	defer conn.Close()
	e := &replayEnv{t: t, tr: conn, q: "orders", rung: time.Minute, depth: b.Depth, tick: b.Clock().Advance, within: replayWithin(t)}
	e.declareQueue()
	ids := e.seed("a", "b", "c")
	ctx, cancel := context.WithCancel(context.Background())
	res, err := acemq.Replay(ctx, conn, "orders.dlq", acemq.ReplayOptions{Filter: func(env acemq.Envelope, _ []byte) bool {
		cancel() // the operator presses ^C while the first is looked at
		return false
	}})
	if !errors.Is(err, context.Canceled) || res.String() != "moved 0, skipped 1 (error)" {
		t.Fatalf("%v, %v", res, err)
	}
	if got := replayIDs(e.take("orders.dlq", 3)); !slices.Equal(got, ids) {
		t.Errorf("left %v", got)
	}
	if _, err := acemq.Replay(context.Background(), conn, "orders.dlq", acemq.ReplayOptions{To: "orders.dlq"}); err == nil {
		t.Error("a replay onto its own source must be refused")
	}
}

func TestReplayResultString(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    acemq.ReplayResult
		want string
	}{
		{acemq.ReplayResult{Moved: 137, Skipped: 363, Stopped: acemq.ReplayDrained}, "moved 137, skipped 363 (drained)"},
		{acemq.ReplayResult{Moved: 500, Stopped: acemq.ReplayLimit}, "moved 500, skipped 0 (limit)"},
		{acemq.ReplayResult{Moved: 2, Skipped: 1}, "moved 2, skipped 1"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}

// lostChannel is a transport whose channel for gets dies before an ack:
// the ack fails and the broker requeues the delivery.
type lostChannel struct{ transport.Transport }

func (l lostChannel) Get(ctx context.Context, q string) (transport.Delivery, bool, error) {
	d, ok, err := l.Transport.Get(ctx, q)
	d.Acknowledger = lostAck{d.Acknowledger}
	return d, ok, err
}

type lostAck struct{ transport.Acknowledger }

func (a lostAck) Ack() error {
	_ = a.Reject(true)
	return transport.ErrStaleDelivery
}

// TestReplayAckLost: the copy is safe but the original comes back: the
// replay stops and says there is a duplicate.
func TestReplayAckLost(t *testing.T) {
	t.Parallel()
	b := memory.New()
	conn := b.Connect()
	defer conn.Close()
	e := &replayEnv{t: t, tr: conn, q: "orders", rung: time.Minute, depth: b.Depth, tick: b.Clock().Advance, within: replayWithin(t)}
	e.declareQueue()
	e.seed("a", "b")
	res, err := acemq.Replay(context.Background(), lostChannel{conn}, "orders.dlq", acemq.ReplayOptions{})
	if !errors.Is(err, transport.ErrStaleDelivery) || !strings.Contains(err.Error(), "a duplicate") || res.String() != "moved 1, skipped 0 (error)" {
		t.Fatalf("%v, %v", res, err)
	}
	if b.Depth("orders") != 1 || b.Depth("orders.dlq") != 2 {
		t.Errorf("orders %d, dlq %d", b.Depth("orders"), b.Depth("orders.dlq"))
	}
}
