package rabbitmq

import (
	"errors"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrUnreadable is matched, with errors.Is, by the error of a read that
// found at the head of a queue a delivery amqp091-go cannot read (see
// IsUnreadable): the command line's peek, triage and replay return it, with
// UnreadableAdvice in its text.
var ErrUnreadable = errors.New("acemq: a delivery this client cannot read")

// IsUnreadable reports whether err is amqp091-go's refusal of a frame it
// cannot read: 501 from its own reader (not the server), with the text of
// its ErrSyntax (502). It comes from a field table nested deeper than 32 or
// holding more than 8192 entries, or a field of a type it does not know;
// RabbitMQ accepted the message, and amqp091-go closes the whole connection
// on it, so every Get or consumer on that connection fails with it.
func IsUnreadable(err error) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && !ae.Server && ae.Code == amqp.FrameError && strings.Contains(ae.Reason, unreadableReason)
}

// UnreadableAdvice says what an operator can do about a delivery
// amqp091-go cannot read at the head of queue (queue as the text should
// name it): the server's log line and the command line's error say the
// same. It does not begin with "acemq: ", so that it can follow one.
func UnreadableAdvice(queue string) string {
	return "a delivery this client cannot read (frame error 501/502: headers nested deeper than 32 or over 8192 entries?) " +
		"is at the head of queue " + queue + "; amqp091-go refuses it and closes the whole connection, " +
		"and no amqp091-go client (acemq peek and replay included) can take it. Remove it with the management UI's " +
		"Get messages (ack mode: reject, requeue false, dead-letters it), or give the queue a delivery limit " +
		"(quorum queues: policy delivery-limit) so that the broker dead-letters it"
}
