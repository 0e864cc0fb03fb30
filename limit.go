package acemq

import (
	"fmt"
	"maps"

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

func orClassic(v any) any {
	if v == nil {
		return "classic"
	}
	return v
}
