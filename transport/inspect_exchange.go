package transport

import "context"

// ExchangeInspector is implemented by transports that can check an
// exchange passively (exchange.declare with passive set), with read
// rights alone. A server that uses the delay queues checks their
// exchanges this way: a deleted level exchange makes the level above
// hold what it dead-letters (neither ready nor unacked, where no passive
// queue declare counts it), and nothing else would notice.
type ExchangeInspector interface {
	// InspectExchange returns nil when the exchange exists and
	// ErrNotFound when it does not. The default exchange ("") always
	// exists.
	InspectExchange(ctx context.Context, name string) error
}
