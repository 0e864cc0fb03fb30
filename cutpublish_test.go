package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport"
)

// TestShutdownCutsAPublishInFlight: a copy's publish that waits (the
// broker refusing the publish connection for now, a confirm that does not
// come) is cut off at the shutdown's deadline, not waited out to its
// PublishTimeout: its outcome is unknown, so its original goes back.
func TestShutdownCutsAPublishInFlight(t *testing.T) {
	t.Parallel()
	broker, conn := bare(t)
	waiting := make(chan struct{}, 1)
	tr := &refusingTransport{Conn: conn, queue: "q.dlq", refuse: func() error { return nil }}
	blocking := &blockingTransport{refusingTransport: tr, waiting: waiting}
	f := startOn(t, broker, &acemq.Server{Transport: blocking, PublishTimeout: 2 * time.Minute},
		map[string]acemq.Handler{"q": always(ack.DeadLetter(errors.New("no")))})
	f.publish("q", "{}", nil)
	select {
	case <-waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("the copy's publish never began")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	go func() { _ = f.srv.Shutdown(ctx) }()
	select {
	case err := <-f.runErr:
		f.runErr <- err // for the clean-up
		if err != nil && !errors.Is(err, acemq.ErrCutOff) {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(30 * time.Second): // a detection bound: PublishTimeout is 2 minutes
		t.Fatal("Run still running 30s after a Shutdown with a deadline of 200ms")
	}
	f.eventually("the original back in its queue", func() bool { return broker.Depth("q") == 1 && broker.Unacked("q") == 0 })
	if n := broker.Depth("q.dlq"); n != 0 {
		t.Errorf("q.dlq holds %d, want 0", n)
	}
}

// blockingTransport holds every publish to its queue until the caller's
// context ends, saying on waiting that one began.
type blockingTransport struct {
	*refusingTransport
	waiting chan struct{}
}

func (b *blockingTransport) Publish(ctx context.Context, p transport.Publishing) (transport.Confirmation, error) {
	if p.RoutingKey != b.queue {
		return b.refusingTransport.Publish(ctx, p)
	}
	select {
	case b.waiting <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return transport.Confirmation{}, fmt.Errorf("acemq: publish to queue %q: %w: not sent: %w", p.RoutingKey, transport.ErrUnconfirmed, ctx.Err())
}
