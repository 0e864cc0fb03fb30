package memory

import (
	"context"
	"fmt"

	"github.com/acemq/acemq/transport"
)

var _ transport.ExchangeInspector = (*Conn)(nil)

// InspectExchange reports whether the exchange name exists, as a passive
// exchange.declare would: ErrNotFound when it does not. The default
// exchange always exists.
func (c *Conn) InspectExchange(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.b.lock()
	defer c.b.unlock()
	if c.closed {
		return transport.ErrClosed
	}
	if name != "" && c.b.exchanges[name] == nil {
		return fmt.Errorf("acemq: inspect exchange %q: %w", name, transport.ErrNotFound)
	}
	return nil
}
