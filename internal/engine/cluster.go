package engine

import (
	"github.com/acemq/acemq/internal/queueargs"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	"go.uber.org/zap"
)

// warnRungsOnCluster warns, once per queue at start-up, of a quorum queue
// whose retry policy waits on rungs while the transport knows several
// nodes. A rung is a classic queue, and RabbitMQ dead-letters out of a
// classic queue at most once: what expires from a rung while the quorum
// queue has no leader (its node lost, or cut off by a network partition,
// until the majority elects another) is dropped, silently. Measured: 19
// to 20 of 1 500 per 20 s partition of the leader's node, 4 to 32 of 400
// per node killed (docs/operators.md, "Rungs and quorum queues in a
// cluster"). The delay queues, quorum queues that dead-letter at least
// once, lose none; so the warning names them. It stays a warning, not a
// change of where waits go: the rungs are the family's wire contract
// too, and a server given one URL cannot tell a cluster behind it.
func (e *Engine) warnRungsOnCluster(q *queueRun) {
	c, ok := e.t.(transport.Clustered)
	if !ok || c.Nodes() < 2 || !queueargs.Quorum(q.args) || !q.declare {
		return
	}
	rungs := q.policy.BrokerRungs()
	if len(rungs) == 0 {
		return
	}
	e.log.Warn("acemq: this quorum queue's retries wait on classic rungs, and the transport knows several nodes: "+
		"RabbitMQ dead-letters out of a classic queue at most once, so what expires from a rung while the queue has no leader "+
		"(a node lost or cut off by a network partition) is dropped; put the waits on the delay queues: the retry policy's WithDelayQueues(true)",
		zap.String("queue", q.name), zap.String("rung", retry.RungName(q.name, rungs[0])), zap.Int("nodes", c.Nodes()))
}
