package acemq

import (
	"fmt"
	"maps"

	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
)

// deliveryLimitArgs returns the queue's declaration arguments with the
// broker's delivery limit and its dead-letter route added, for a
// QueueConfig.DeliveryLimit above zero; args unchanged otherwise. It
// refuses what would be half a declaration or contradict the queue's own
// arguments, naming what is wrong.
func deliveryLimitArgs(queue string, c QueueConfig) (map[string]any, error) {
	args := c.Args
	if own, ok := args["x-delivery-limit"]; ok {
		if _, routed := args["x-dead-letter-exchange"]; !routed {
			return nil, fmt.Errorf("x-delivery-limit %v with no x-dead-letter-exchange: the broker would drop a message past the limit; set DeliveryLimit instead, which declares the route into %s", own, DeadLetterQueue(queue))
		}
		if c.DeliveryLimit > 0 {
			return nil, fmt.Errorf("a DeliveryLimit and an x-delivery-limit in Args; set one")
		}
	}
	switch {
	case c.DeliveryLimit < 0:
		return nil, fmt.Errorf("DeliveryLimit %d; it must be zero (none declared) or above", c.DeliveryLimit)
	case c.DeliveryLimit == 0:
		return args, nil
	case args["x-queue-type"] != "quorum":
		return nil, fmt.Errorf("DeliveryLimit needs a quorum queue (Args x-queue-type quorum); this one is %v", orClassic(args["x-queue-type"]))
	}
	for _, k := range []string{"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy", "x-overflow"} {
		if v, ok := args[k]; ok {
			return nil, fmt.Errorf("DeliveryLimit declares %s itself, and Args sets it to %v; remove it from Args", k, v)
		}
	}
	out := maps.Clone(args)
	out["x-delivery-limit"] = int64(c.DeliveryLimit)
	out["x-dead-letter-exchange"] = retry.DeadLetterExchange
	out["x-dead-letter-routing-key"] = queue
	out["x-dead-letter-strategy"] = "at-least-once"
	out["x-overflow"] = "reject-publish"
	return out, nil
}

// deliveryLimit is the limit the queue's declaration sets, 0 if none.
func deliveryLimit(args map[string]any) int {
	n, ok := wire.Int(args["x-delivery-limit"])
	if !ok || n <= 0 || n > 1<<31 {
		return 0
	}
	return int(n)
}

func orClassic(v any) any {
	if v == nil {
		return "classic"
	}
	return v
}

// checkDeliveryLimit says at start-up what a queue's delivery limit means
// for its retry policy: a limit below the policy's attempts is a warning,
// or with StrictDeliveryLimit an error. On RabbitMQ 4, whose quorum queues
// have a limit of 20 unless set, a quorum queue with no dead-letter route
// of its own is warned of too: a message past the limit is dropped.
func (e *engine) checkDeliveryLimit(q *queueRun) error {
	limit := deliveryLimit(q.args)
	if limit > 0 && limit < q.policy.MaxAttempts() {
		msg := fmt.Sprintf("queue %s is declared with a delivery limit of %d, below the %d attempts its retry policy allows: a message redelivered that often (crashes, shutdown give-backs, consumer timeouts) goes to %s before its attempts are spent",
			q.name, limit, q.policy.MaxAttempts(), q.deadLetter)
		if q.strict {
			return fmt.Errorf("acemq: %s (StrictDeliveryLimit)", msg)
		}
		e.log.Warn("acemq: "+msg, zap.String("queue", q.name), zap.Int("delivery_limit", limit), zap.Int("max_attempts", q.policy.MaxAttempts()))
	}
	if e.broker.major() >= 4 && q.args["x-queue-type"] == "quorum" && limit == 0 && !q.hasOwnDeadLetterRoute() {
		e.log.Warn("acemq: RabbitMQ 4 gives this quorum queue a delivery limit of 20, and it has no dead-letter route: a message delivered 20 times is dropped. Set QueueConfig.DeliveryLimit",
			zap.String("queue", q.name))
	}
	return nil
}
