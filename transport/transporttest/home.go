package transporttest

import (
	"testing"

	"github.com/acemq/acemq/transport"
)

// A queue's home node (transport.Queue.Home, how a partitioned queue's
// partitions are spread over a cluster) is a wish a transport that knows
// one node cannot grant, and ignores: the queue is declared as without
// it, and a redeclare without it (or with another) is equivalent, since
// it is no argument the broker sees.
func init() {
	cases = append(cases, testCase{"DeclareHomeOneNode", testDeclareHomeOneNode})
}

func testDeclareHomeOneNode(t *testing.T, e *env) {
	c := e.conn()
	q := e.name("home")
	args := map[string]any{"x-queue-type": "quorum"}
	e.declare(c, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true, Args: args, Home: 3}}})
	e.declare(c, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true, Args: args}}})
	e.declare(c, transport.Topology{Queues: []transport.Queue{{Name: q, Durable: true, Args: args, Home: 2}}})
	e.send(c, q, "m1")
	e.depth(c, q, 1)
}
