package delay

import (
	"context"
	"fmt"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// Redeliver sends every message waiting in the Undeliverable queue back
// to the Deliver exchange, once each: those whose destination exists now
// arrive, the others come back to wait again. It returns how many it
// moved. A client does this, not the broker, because RabbitMQ drops a
// message dead-lettered round a loop of queues with no rejection in it,
// so a TTL loop would lose the second round.
//
// Each is forwarded as it is, without the broker's own headers and
// properties (wire.Forward), and published (confirmed, mandatory) before
// the original is acked:
// at worst a crash between the two delivers a message twice, never zero
// times.
func Redeliver(ctx context.Context, t transport.Transport) (int, error) {
	info, err := t.Inspect(ctx, Undeliverable)
	if err != nil {
		return 0, fmt.Errorf("acemq: redeliver: %w", err)
	}
	moved := 0
	for range info.Messages {
		d, ok, err := t.Get(ctx, Undeliverable)
		if err != nil || !ok {
			return moved, err
		}
		c, err := t.Publish(ctx, wire.Forward(d, Deliver, d.RoutingKey, 0))
		if err == nil && !c.Routed {
			err = fmt.Errorf("acemq: redeliver: %q reached no queue (is %s declared?)", d.RoutingKey, Undeliverable)
		}
		if err != nil {
			_ = d.Reject(true)
			return moved, err
		}
		if err := d.Ack(); err != nil {
			return moved, err
		}
		moved++
	}
	return moved, nil
}
