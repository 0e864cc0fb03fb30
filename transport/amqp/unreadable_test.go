package rabbitmq

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestIsUnreadable: amqp091-go's own refusal of a frame, wrapped as a Get
// returns it, is told from the server's errors and from other frame
// errors; the advice names the queue and the way out the log line names.
func TestIsUnreadable(t *testing.T) {
	t.Parallel()
	refused := &amqp.Error{Code: amqp.FrameError, Reason: amqp.ErrSyntax.Error()}
	for err, want := range map[error]bool{
		refused: true,
		fmt.Errorf("acemq: get from queue %q: %w", "q", refused):                           true,
		&amqp.Error{Code: amqp.FrameError, Reason: amqp.ErrSyntax.Error(), Server: true}:   false,
		&amqp.Error{Code: amqp.FrameError, Reason: "frame too large"}:                      false,
		&amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no queue 'q'", Server: true}: false,
		errors.New("EOF"): false,
	} {
		if got := IsUnreadable(err); got != want {
			t.Errorf("IsUnreadable(%v) = %v", err, got)
		}
	}
	advice := UnreadableAdvice("orders.dlq")
	for _, s := range []string{"is at the head of queue orders.dlq", "Remove it with the management UI's Get messages", "delivery-limit"} {
		if !strings.Contains(advice, s) {
			t.Errorf("the advice does not say %q: %s", s, advice)
		}
	}
}
