// Package queueargs computes the arguments a work queue is declared with
// from a queue's settings (acemq.QueueConfig's DeliveryLimit and
// Ordered), so that every declarer of a queue (a Server, acemq topology)
// computes the same ones: RabbitMQ refuses a second declaration whose
// arguments differ (PRECONDITION_FAILED).
package queueargs

import (
	"errors"
	"fmt"
	"maps"

	"github.com/acemq/acemq/retry"
)

// SingleActiveConsumer is the queue argument that gives one consumer at a
// time a queue's messages: what an ordered queue is declared with.
const SingleActiveConsumer = "x-single-active-consumer"

// Ordered adds single active consumer to args when the queue is ordered,
// leaving args itself alone.
func Ordered(args map[string]any, ordered bool) map[string]any {
	if !ordered || args[SingleActiveConsumer] == true {
		return args
	}
	out := maps.Clone(args)
	if out == nil {
		out = make(map[string]any, 1)
	}
	out[SingleActiveConsumer] = true
	return out
}

// Quorum reports whether args declare a quorum queue.
func Quorum(args map[string]any) bool { return args["x-queue-type"] == "quorum" }

// CheckOrdered refuses the arguments of an ordered queue that cannot mean
// what they say: a queue that is not a quorum queue, or one whose args
// turn single active consumer off.
func CheckOrdered(args map[string]any) error {
	if !Quorum(args) {
		return fmt.Errorf("Ordered needs a quorum queue (Args x-queue-type quorum); this one is %v: on RabbitMQ 3.10 a classic single-active-consumer queue crashes when its active consumer cancels while holding deliveries, which is how a server drains (rabbitmq-server#5460)", OrClassic(args["x-queue-type"]))
	}
	if v, ok := args[SingleActiveConsumer]; ok && v != true {
		return fmt.Errorf("Ordered, and Args sets %s to %v", SingleActiveConsumer, v)
	}
	return nil
}

// DeliveryLimit returns args with the broker's delivery limit of queue
// declared (x-delivery-limit) and the route a message past it takes: into
// queue's .dlq through acemq.dlx, at least once. A limit of 0 declares
// none and returns args as they are; a limit in args without a route is
// refused, since the broker drops what passes it.
func DeliveryLimit(queue string, args map[string]any, limit int) (map[string]any, error) {
	if own, ok := args["x-delivery-limit"]; ok {
		if _, routed := args["x-dead-letter-exchange"]; !routed {
			return nil, fmt.Errorf("x-delivery-limit %v with no x-dead-letter-exchange: the broker would drop a message past the limit; set DeliveryLimit instead, which declares the route into %s", own, queue+".dlq")
		}
		if limit > 0 {
			return nil, errors.New("a DeliveryLimit and an x-delivery-limit in Args; set one")
		}
	}
	switch {
	case limit < 0:
		return nil, fmt.Errorf("DeliveryLimit %d; it must be zero (none declared) or above", limit)
	case limit == 0:
		return args, nil
	case !Quorum(args):
		return nil, fmt.Errorf("DeliveryLimit needs a quorum queue (Args x-queue-type quorum); this one is %v", OrClassic(args["x-queue-type"]))
	}
	for _, k := range []string{"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy", "x-overflow"} {
		if v, ok := args[k]; ok {
			return nil, fmt.Errorf("DeliveryLimit declares %s itself, and Args sets it to %v; remove it from Args", k, v)
		}
	}
	out := maps.Clone(args)
	out["x-delivery-limit"] = int64(limit)
	out["x-dead-letter-exchange"] = retry.DeadLetterExchange
	out["x-dead-letter-routing-key"] = queue
	out["x-dead-letter-strategy"] = "at-least-once"
	out["x-overflow"] = "reject-publish"
	return out, nil
}

// OrClassic is a queue type as an error says it: x-queue-type, or classic
// when it is not set.
func OrClassic(v any) any {
	if v == nil {
		return "classic"
	}
	return v
}
