package rabbitmq

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestSettleOnABrokenConnectionIsStale: a settlement whose write the
// socket refused (the node closed the connection under it, as a paused
// node does) is ErrStaleDelivery, as on a closed channel: the broker
// requeues the delivery itself, and nothing more is wrong with it.
func TestSettleOnABrokenConnectionIsStale(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET},
		&net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE},
		amqp.ErrClosed,
	} {
		a := &acker{ch: &amqp.Channel{}}
		if got := a.settle(func() error { return err }); !errors.Is(got, transport.ErrStaleDelivery) {
			t.Errorf("settle, the write failing with %v: %v, want ErrStaleDelivery", err, got)
		}
	}
	a := &acker{ch: &amqp.Channel{}}
	if got := a.settle(func() error { return &amqp.Error{Code: 406, Reason: "PRECONDITION_FAILED - unknown delivery tag 7"} }); errors.Is(got, transport.ErrStaleDelivery) || got == nil {
		t.Errorf("settle refused by the broker: %v, want its reason, not ErrStaleDelivery", got)
	}
}
