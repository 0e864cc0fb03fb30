package acemq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/delay"
)

// TestPublishPassingHeadersOnThroughDelays: a handler that passes the
// headers of a message that came through the delay queues on to its own
// delayed publish (as the Publisher.Propagator doc invites) passes the
// broker's x-death with them. Every hop of such a chain must arrive: the
// publish drops what the broker owns, where RabbitMQ (and the memory
// broker, which models it) would drop the new message as a dead-letter
// cycle the moment its walk entered a level the old x-death names, after
// confirming it routed.
func TestPublishPassingHeadersOnThroughDelays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, p := delayed(t, "hops")
	// Each delay waits on levels the one before it waited on too: 3 units
	// on levels 1 and 0, 7 on 2, 1 and 0, 5 on 2 and 0, 15 on 3 to 0.
	delays := []time.Duration{3 * delay.Unit, 7 * delay.Unit, 5 * delay.Unit, 15 * delay.Unit}
	headers := map[string]any{"tenant": "acme"}
	for hop, d := range delays {
		res, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: "hops", ID: "chain-1", Headers: headers, Delay: d, Body: []byte(fmt.Sprint(hop))})
		if err != nil || !res.Routed {
			t.Fatalf("hop %d: %+v, %v", hop, res, err)
		}
		b.Clock().Advance(d)
		got, ok, err := p.Transport.Get(ctx, "hops")
		if err != nil || !ok {
			t.Fatalf("hop %d (%v): never arrived (err %v); level depths: %v", hop, d, err, levelDepths(b))
		}
		if string(got.Body) != fmt.Sprint(hop) {
			t.Fatalf("hop %d: got %q", hop, got.Body)
		}
		if hop > 0 && got.Headers["tenant"] != "acme" {
			t.Errorf("hop %d: the caller's own header was not passed on: %v", hop, got.Headers)
		}
		if got.Headers["x-death"] == nil {
			t.Fatalf("hop %d: arrived without x-death; the test no longer passes the broker's headers on", hop)
		}
		if err := got.Ack(); err != nil {
			t.Fatal(err)
		}
		headers = got.Headers // what a handler's m.Headers() holds
	}
}

// levelDepths is the depth of every non-empty delay level.
func levelDepths(b interface{ Depth(string) int }) map[string]int {
	out := map[string]int{}
	for k := range delay.Levels {
		if n := b.Depth(delay.Level(k)); n > 0 {
			out[delay.Level(k)] = n
		}
	}
	return out
}
