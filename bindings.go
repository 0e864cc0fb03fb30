package acemq

import (
	"fmt"
	"strings"

	"github.com/acemq/acemq/transport"
)

// Binding subscribes a served queue to an exchange, for publish and
// subscribe: the server declares the exchange (durable, of its Kind) and
// binds the queue to it once per key, with the rest of the queue's
// topology (QueueConfig.Bindings). Many services' queues bound to one
// topic exchange each get their own copy of every event.
type Binding struct {
	// Exchange is the exchange's name. The default exchange ("") cannot
	// be bound to; an amq.* exchange is bound to but not declared (the
	// broker owns it).
	Exchange string
	// Kind is "topic" unless set: "direct", "fanout" or "headers". A
	// headers binding here carries no match arguments, so it takes every
	// message (RabbitMQ matches all of no conditions); bind with
	// transport.Topology for header matching.
	Kind string
	// Keys are the routing keys, one binding each ("payment.*",
	// "payment.#"). A fanout or headers exchange ignores keys and needs
	// none; a topic or direct one needs at least one.
	Keys []string
}

// kinds are the exchange kinds a Binding may name.
var kinds = map[string]bool{"topic": true, "direct": true, "fanout": true, "headers": true}

// topology is what declaring b for queue declares.
func (b Binding) topology(queue string) transport.Topology {
	kind := b.kind()
	var t transport.Topology
	if !strings.HasPrefix(b.Exchange, "amq.") {
		t.Exchanges = []transport.Exchange{{Name: b.Exchange, Kind: kind, Durable: true}}
	}
	if kind == "fanout" || kind == "headers" {
		t.Bindings = []transport.Binding{{Queue: queue, Exchange: b.Exchange}}
		return t
	}
	for _, k := range b.Keys {
		t.Bindings = append(t.Bindings, transport.Binding{Queue: queue, Exchange: b.Exchange, Key: k})
	}
	return t
}

func (b Binding) kind() string {
	if b.Kind == "" {
		return "topic"
	}
	return b.Kind
}

// check says what is wrong with b, before anything is declared.
func (b Binding) check() error {
	kind := b.kind()
	switch {
	case b.Exchange == "":
		return fmt.Errorf("no exchange named (the default exchange cannot be bound to)")
	case len(b.Exchange) > 255:
		return fmt.Errorf("exchange name of %d bytes, over AMQP's 255", len(b.Exchange))
	case !kinds[kind]:
		return fmt.Errorf("exchange %s of kind %q; want topic, direct, fanout or headers", b.Exchange, b.Kind)
	case (kind == "topic" || kind == "direct") && len(b.Keys) == 0:
		return fmt.Errorf("%s exchange %s with no routing key: it would route nothing to the queue", kind, b.Exchange)
	}
	for _, k := range b.Keys {
		if len(k) > 255 {
			return fmt.Errorf("routing key of %d bytes on exchange %s, over AMQP's 255", len(k), b.Exchange)
		}
	}
	return nil
}

// subscriptions is the declarations of every binding of queue.
func subscriptions(queue string, bindings []Binding) transport.Topology {
	var t transport.Topology
	for _, b := range bindings {
		bt := b.topology(queue)
		t.Exchanges = append(t.Exchanges, bt.Exchanges...)
		t.Bindings = append(t.Bindings, bt.Bindings...)
	}
	return t
}
