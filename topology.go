package acemq

import (
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
)

// DeadLetterQueue names the queue where queue's dead letters go.
func DeadLetterQueue(queue string) string { return queue + ".dlq" }

// ParkedQueue names the queue where queue's unreadable messages go, kept
// apart from its dead letters.
func ParkedQueue(queue string) string { return queue + ".parked" }

// Topology returns the declarations a consumer of queue makes at start-up:
// the exchanges acemq.retry and acemq.dlx, the queue itself (with args, for
// example a quorum queue's), its .dlq and .parked, one rung per distinct
// broker-side delay of p, and the binding that brings an expired rung message
// home. Every server of queue declares the same, so whichever comes second
// declares nothing new. The binding home is not optional: a direct exchange
// drops what it cannot route, so without it every expired retry would be
// lost. .dlq is bound to acemq.dlx by the queue's name and .parked by its
// own, so that a work queue dead-lettering through acemq.dlx lands in .dlq.
func Topology(queue string, p retry.Policy, args map[string]any) transport.Topology {
	t := transport.Topology{
		Exchanges: []transport.Exchange{
			{Name: retry.Exchange, Kind: "direct", Durable: true},
			{Name: retry.DeadLetterExchange, Kind: "direct", Durable: true},
		},
		Queues: []transport.Queue{
			{Name: queue, Durable: true, Args: args},
			{Name: DeadLetterQueue(queue), Durable: true},
			{Name: ParkedQueue(queue), Durable: true},
		},
		Bindings: []transport.Binding{
			{Queue: queue, Exchange: retry.Exchange, Key: queue},
			// The broker's own dead-lettering lands in .dlq when the work
			// queue is declared with x-dead-letter-exchange acemq.dlx (and
			// x-dead-letter-routing-key queue): the last resort for what the
			// library cannot place itself. Bindings change no queue's
			// arguments, so every family member's declarations still agree.
			{Queue: DeadLetterQueue(queue), Exchange: retry.DeadLetterExchange, Key: queue},
			{Queue: ParkedQueue(queue), Exchange: retry.DeadLetterExchange, Key: ParkedQueue(queue)},
		},
	}
	for _, d := range p.BrokerRungs() {
		t.Queues = append(t.Queues, transport.Queue{
			Name:    retry.RungName(queue, d),
			Durable: true,
			Args:    retry.RungArgs(queue, d),
		})
	}
	return t
}
