package rabbitmq

import (
	"context"
	"errors"
	"fmt"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQP reply codes that callers branch on.
const (
	codeAccessRefused      = 403
	codeNotFound           = 404
	codeResourceLocked     = 405
	codePreconditionFailed = 406
)

// classify turns an amqp091-go error into one that wraps the transport
// sentinel a caller branches on, keeping the broker's own text. Errors with
// no sentinel pass through unchanged.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, amqpconn.ErrClosed) {
		return transport.ErrClosed
	}
	if v := amqpconn.Classify(err); v.Refusal == amqpconn.Transient {
		return refused(v, err, nil)
	}
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		return err
	}
	var sentinel error
	switch ae.Code {
	case codeNotFound:
		sentinel = transport.ErrNotFound
	case codePreconditionFailed:
		sentinel = transport.ErrPreconditionFailed
	case codeAccessRefused:
		sentinel = transport.ErrAccessRefused
	case codeResourceLocked:
		sentinel = transport.ErrResourceLocked
	case codeNotAllowed: // connection.open refused for good (Classify: not for now)
		sentinel = transport.ErrAccessRefused
		if amqpconn.Classify(err).Cause == amqpconn.CauseVhostNotFound {
			sentinel = transport.ErrNotFound // the vhost is gone
		}
	default:
		return err
	}
	return fmt.Errorf("%w: %s (%d)", sentinel, ae.Reason, ae.Code)
}

// unconfirmed explains why a publish has an unknown outcome, wrapping
// transport.ErrUnconfirmed and the cause.
func unconfirmed(p *transport.Publishing, cause error) error {
	return fmt.Errorf("acemq: publish to %s: %w: %w", destination(p), transport.ErrUnconfirmed, cause)
}

// isCtxErr reports whether err is a context's own error.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// errChannelClosed is the cause given when a channel died with a publish in
// flight.
var errChannelClosed = errors.New("the channel closed before the broker confirmed")
