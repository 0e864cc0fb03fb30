package rabbitmq

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/internal/amqpconn"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQP reply codes a consumer's channel or connection can end with, beyond
// those of errors.go.
const (
	codeConnectionForced = 320 // an operator, a vhost deletion, a node shutting down
	codeNotAllowed       = 530 // connection.open refused: a connection limit, the vhost gone or closed to the user
)

// unreadableReason is what amqp091-go's reader says of a frame it refuses:
// it closes the whole connection with 501 (server false) and this text,
// that of its ErrSyntax (502): a field table nested deeper than 32 or
// holding more than 8192 entries (read.go, maxFieldDepth and
// maxContainerElements), or a field of a type it does not know. RabbitMQ
// accepted the message; no amqp091-go client can take it.
var unreadableReason = amqp.ErrSyntax.Error()

// consumerTimeoutText is in the reason of the channel.close with which
// RabbitMQ ends a channel whose delivery outlived consumer_timeout (406,
// checked against 3.10.8): "PRECONDITION_FAILED - delivery
// acknowledgement on channel 2 timed out. Timeout value used: 1800000 ms.
// ...".
const consumerTimeoutText = "delivery acknowledgement on channel"

// timeoutUsedText precedes, in that reason, the timeout the broker used,
// in milliseconds.
const timeoutUsedText = "Timeout value used: "

// statedTimeout is the timeout a consumer-timeout reason says the broker
// used ("Timeout value used: 1800000 ms"), or 0 when the reason does not
// say or says something unreadable.
func statedTimeout(reason string) time.Duration {
	_, rest, ok := strings.Cut(reason, timeoutUsedText)
	if !ok {
		return 0
	}
	digits, _, ok := strings.Cut(rest, " ms")
	if !ok {
		return 0
	}
	ms, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || ms <= 0 || ms > int64(math.MaxInt64/time.Millisecond) {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// ending is what a subscription makes of the end of its channel's
// deliveries: err is why, in the broker's words (nil when unknown or
// asked for), and final whether the subscription ends with it (Err) rather
// than consuming again on a new channel.
type ending struct {
	err        error
	final      bool
	unreadable bool // amqp091-go refused a frame: a delivery it cannot read
}

// decideCancel is the ending after the broker cancelled the consumer
// (basic.cancel): the queue was deleted, or the node holding it went away.
// The consumer is gone and the channel open: consuming again would only
// find the queue missing (404) or, for a queue that came back elsewhere,
// hide that it had gone. The server above declares it again and
// resubscribes.
func decideCancel(queue string) ending {
	return ending{
		err:   fmt.Errorf("%w of queue %q: the queue was deleted, or its node went down", transport.ErrCancelled, queue),
		final: true,
	}
}

// decideClose is the ending after the consumer's channel closed, with the
// reason amqp091-go gave (nil: the connection went without one), or after
// consuming again failed with err. The rule: what a new channel cannot
// mend ends the subscription, and what it can is retried.
//
//   - 404 NOT_FOUND (the queue is gone) and 403 ACCESS_REFUSED (read
//     permission withdrawn) end it: ErrNotFound, ErrAccessRefused.
//   - A refusal for now, as amqpconn.Classify reads the broker's words
//     (530 "connection limit (N) is reached" for the vhost's or the user's
//     max-connections, 541 "vhost ... is down", a node not listening),
//     consumes again: ErrRefused, never final. amqpconn dials again with
//     backoff and tells ConsumeOptions.OnRefused.
//   - 530 NOT_ALLOWED on reconnecting for good (the vhost was deleted, or
//     the user's access to it withdrawn) ends it: ErrNotFound when the
//     broker says "not found", else ErrAccessRefused.
//   - 406 with "delivery acknowledgement ... timed out" (consumer_timeout)
//     consumes again: the broker requeued the delivery, marked
//     redelivered, and the server above sees it come back.
//   - 320 CONNECTION_FORCED (an operator, a node shutting down) consumes
//     again once reconnected; were it a vhost deletion, the reconnect is
//     refused with 530 and that ends it.
//   - 501/502 from amqp091-go's own reader (a delivery it cannot read)
//     consumes again on a new connection, which amqpconn spaces out.
//   - Anything else (a lost socket, 541, a 406 for another reason) consumes
//     again.
func decideClose(queue string, err error) ending {
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		return ending{err: err}
	}
	words := fmt.Sprintf("%s (%d)", ae.Reason, ae.Code)
	verdict := amqpconn.Classify(err)
	switch {
	case verdict.Refusal == amqpconn.Transient:
		return ending{err: fmt.Errorf("%w: the broker refused to reconnect the consumer of queue %q for now (%s): %s", transport.ErrRefused, queue, verdict.Cause, words)}
	case ae.Code == codeNotFound:
		return ending{err: fmt.Errorf("%w: consuming queue %q: %s", transport.ErrNotFound, queue, words), final: true}
	case ae.Code == codeAccessRefused:
		return ending{err: fmt.Errorf("%w: consuming queue %q: %s", transport.ErrAccessRefused, queue, words), final: true}
	case ae.Code == codeNotAllowed && verdict.Cause == amqpconn.CauseVhostNotFound:
		return ending{err: fmt.Errorf("%w: the broker refused to reconnect the consumer of queue %q: %s", transport.ErrNotFound, queue, words), final: true}
	case ae.Code == codeNotAllowed:
		return ending{err: fmt.Errorf("%w: the broker refused to reconnect the consumer of queue %q: %s", transport.ErrAccessRefused, queue, words), final: true}
	case ae.Code == codePreconditionFailed && strings.Contains(ae.Reason, consumerTimeoutText) && strings.Contains(ae.Reason, "timed out"):
		return ending{err: fmt.Errorf("%w: the broker closed the channel of the consumer of queue %q: %s", transport.ErrConsumerTimeout, queue, words)}
	case ae.Code == codeConnectionForced:
		return ending{err: fmt.Errorf("%w: the broker closed the connection of the consumer of queue %q: %s", transport.ErrClosed, queue, words)}
	case !ae.Server && ae.Code == amqp.FrameError && strings.Contains(ae.Reason, unreadableReason):
		return ending{err: fmt.Errorf("acemq: amqp091-go could not read a delivery of queue %q and closed the connection: %s", queue, words), unreadable: true}
	}
	return ending{err: fmt.Errorf("acemq: the consumer of queue %q lost its channel: %s", queue, words)}
}
