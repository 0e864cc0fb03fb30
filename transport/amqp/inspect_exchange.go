package rabbitmq

import (
	"context"
	"fmt"

	"github.com/acemq/acemq/transport"
)

var _ transport.ExchangeInspector = (*Transport)(nil)

// InspectExchange declares the exchange name passively, on a channel kept
// for Inspect: a missing exchange closes that channel (404), which is then
// dropped.
func (t *Transport) InspectExchange(ctx context.Context, name string) error {
	if t.isClosed() {
		return transport.ErrClosed
	}
	if name == "" {
		return nil // the default exchange: RabbitMQ refuses to declare it, even passively
	}
	gen := t.consume.Generation()
	ch, err := t.inspect.take(ctx, t.consume)
	if err != nil {
		return fmt.Errorf("acemq: inspect exchange %q: %w", name, classify(err))
	}
	if err := ch.ExchangeDeclarePassive(name, "topic", false, false, false, false, nil); err != nil {
		closeChannel(ch) // a 404 closed it already
		return fmt.Errorf("acemq: inspect exchange %q: %w", name, classify(err))
	}
	t.inspect.give(ch, gen)
	return nil
}
