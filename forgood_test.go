package acemq_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport"
)

// TestCopyRefusedForGoodEndsRun: a copy the broker refuses for good (the
// user's access withdrawn, the vhost deleted) ends Run with the broker's
// reason, long before PublishTimeout's 2 minutes, and its original goes
// back to the broker unacknowledged: publishing again cannot place it,
// and giving it back alone would bring it round to the same refusal.
func TestCopyRefusedForGoodEndsRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"access withdrawn", fmt.Errorf("acemq: publish to queue \"q.dlq\": %w: ACCESS_REFUSED - access to exchange 'amq.default' in vhost 'v' refused for user 'u' (403)", transport.ErrAccessRefused)},
		{"vhost deleted", fmt.Errorf("acemq: publish to queue \"q.dlq\": open channel: %w: NOT_ALLOWED - vhost v not found (530)", transport.ErrNotFound)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			broker, conn := bare(t)
			tr := &refusingTransport{Conn: conn, queue: "q.dlq", refuse: func() error { return tc.err }}
			f := startOn(t, broker, &acemq.Server{Transport: tr, PublishTimeout: 2 * time.Minute},
				map[string]acemq.Handler{"q": always(ack.DeadLetter(errors.New("no")))})
			f.publish("q", "{}", nil)
			select {
			case err := <-f.runErr:
				f.runErr <- err // for the clean-up
				if !errors.Is(err, errors.Unwrap(tc.err)) || !strings.Contains(err.Error(), tc.err.Error()) {
					t.Errorf("Run = %v, want the broker's refusal %q", err, tc.err)
				}
			case <-time.After(30 * time.Second): // a detection bound: PublishTimeout is 2 minutes
				t.Fatal("Run still running 30s after the broker refused a copy for good")
			}
			f.eventually("the original back in its queue", func() bool { return broker.Depth("q") == 1 && broker.Unacked("q") == 0 })
			if n := broker.Depth("q.dlq"); n != 0 {
				t.Errorf("q.dlq holds %d, want 0: the copy was refused", n)
			}
			if l := f.logs.FilterMessageSnippet("refuses the copy for good").Len(); l == 0 {
				t.Error("no log line says the copy was refused for good")
			}
		})
	}
}

// TestCopyRefusedForNowIsWaitedOut: a publish the broker refuses for now
// (transport.ErrRefused: a connection limit reached) never ends Run: the
// original goes back and comes round again until the copy is placed.
func TestCopyRefusedForNowIsWaitedOut(t *testing.T) {
	t.Parallel()
	broker, conn := bare(t)
	var refusals atomic.Int32
	refusals.Store(3)
	tr := &refusingTransport{Conn: conn, queue: "q.dlq", refuse: func() error {
		if refusals.Add(-1) >= 0 {
			return &transport.RefusedError{Cause: "connection_limit", Reason: "NOT_ALLOWED - access to vhost 'v' refused for user 'u': connection limit (1) is reached (530)", Tries: 1, Since: time.Now()}
		}
		return nil
	}}
	f := startOn(t, broker, &acemq.Server{Transport: tr, PublishTimeout: 2 * time.Minute},
		map[string]acemq.Handler{"q": always(ack.DeadLetter(errors.New("no")))})
	f.publish("q", "{}", nil)
	f.eventually("the copy placed once the refusals end", func() bool {
		return broker.Depth("q.dlq") == 1 && broker.Depth("q") == 0 && broker.Unacked("q") == 0
	})
	select {
	case err := <-f.runErr:
		f.runErr <- err
		t.Fatalf("Run ended on a refusal for now: %v", err)
	default:
	}
	if n := tr.refused.Load(); n != 3 {
		t.Errorf("%d publishes refused, want 3", n)
	}
}
