package acemq

import "github.com/acemq/acemq/internal/queueargs"

// deliveryLimitArgs returns the queue's declaration arguments with the
// broker's delivery limit and its dead-letter route added, for a
// QueueConfig.DeliveryLimit above zero; args unchanged otherwise. It
// refuses what would be half a declaration or contradict the queue's own
// arguments, naming what is wrong.
func deliveryLimitArgs(queue string, c QueueConfig) (map[string]any, error) {
	return queueargs.DeliveryLimit(queue, c.Args, c.DeliveryLimit)
}
