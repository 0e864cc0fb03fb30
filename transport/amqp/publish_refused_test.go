package rabbitmq

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
)

// TestPublishAccessWithdrawn: a publish whose user's access to the vhost
// was withdrawn fails with ErrAccessRefused in the broker's words, long
// before its context's 2 minutes, never ErrUnconfirmed or a wait:
//
//   - connections closed: the reconnect is refused for good (530
//     NOT_ALLOWED), and the publish gives up as soon as it is;
//   - connections left open: RabbitMQ refuses the publish on a channel
//     opened after the withdrawal (403 ACCESS_REFUSED on amq.default), a
//     refusal of this message, not an unknown outcome.
func TestPublishAccessWithdrawn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		close bool
		code  string
	}{{"connections closed", true, "530"}, {"connections open", false, "403"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, vh := freshVhost(t)
			// One channel, so that the second publish opens a channel
			// after the withdrawal once the first has had its closed.
			tr := dialURL(t, url, WithPublishChannels(1))
			q, _ := declareAndConsume(t, tr)
			pub := transport.Publishing{RoutingKey: q, Body: []byte("x"), Mandatory: true}
			if _, err := tr.Publish(testCtx(t, 30*time.Second), pub); err != nil {
				t.Fatalf("Publish before the withdrawal: %v", err)
			}
			rabbitmqctl(t, "", "clear_permissions", "-p", vh, "guest")
			if tc.close {
				rabbitmqctl(t, "", "close_all_connections", "-p", vh, "acemq test: access withdrawn")
			}
			ctx := testCtx(t, 2*time.Minute)
			var err error
			// With the connections open the channel in the pool may still
			// be let through (RabbitMQ caches a channel's checks): the
			// refusal comes once a new channel publishes.
			for range 5 {
				if _, err = tr.Publish(ctx, pub); err != nil {
					break
				}
				if !tc.close { // a fresh channel for the next publish
					tr.pub.slots[0].cur.Load().ch.Close()
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("Publish waited out its context: %v", err)
			}
			if !errors.Is(err, transport.ErrAccessRefused) || errors.Is(err, transport.ErrUnconfirmed) || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("Publish with the access withdrawn = %v, want ErrAccessRefused with the broker's %s", err, tc.code)
			}
		})
	}
}
