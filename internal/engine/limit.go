package engine

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/queueargs"
	"github.com/acemq/acemq/internal/wire"
)

// checkDeliveryLimit says at start-up what a queue's delivery limit means
// for its retry policy: a limit below the policy's attempts is a warning,
// or with StrictDeliveryLimit an error. On RabbitMQ 4, whose quorum queues
// have a limit of 20 unless set, a quorum queue with no dead-letter route
// of its own is warned of too: a message past the limit is dropped.
func (e *Engine) checkDeliveryLimit(q *queueRun) error {
	limit := deliveryLimit(q.args)
	if limit > 0 && limit < q.policy.MaxAttempts() {
		msg := fmt.Sprintf("queue %s is declared with a delivery limit of %d, below the %d attempts its retry policy allows: a message redelivered that often (crashes, shutdown give-backs, consumer timeouts) goes to %s before its attempts are spent",
			q.name, limit, q.policy.MaxAttempts(), q.deadLetter)
		if q.strict {
			return fmt.Errorf("acemq: %s (StrictDeliveryLimit)", msg)
		}
		e.log.Warn("acemq: "+msg, zap.String("queue", q.name), zap.Int("delivery_limit", limit), zap.Int("max_attempts", q.policy.MaxAttempts()))
	}
	if e.broker.major() >= 4 && queueargs.Quorum(q.args) && limit == 0 && !q.hasOwnDeadLetterRoute() {
		e.log.Warn("acemq: RabbitMQ 4 gives this quorum queue a delivery limit of 20, and it has no dead-letter route: a message delivered 20 times is dropped. Set QueueConfig.DeliveryLimit",
			zap.String("queue", q.name))
	}
	return nil
}

// deliveryLimit is the limit the queue's declaration sets, 0 if none.
func deliveryLimit(args map[string]any) int {
	n, ok := wire.Int(args["x-delivery-limit"])
	if !ok || n <= 0 || n > 1<<31 {
		return 0
	}
	return int(n)
}
