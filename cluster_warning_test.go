package acemq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

// clustered is a memory connection that says it knows nodes nodes, as an
// amqp transport given several URLs does (transport.Clustered).
type clustered struct {
	*memory.Conn
	nodes int
}

func (c clustered) Nodes() int { return c.nodes }

// A quorum queue whose retries wait on classic rungs, served through a
// transport that knows several nodes, is warned of at start-up, naming
// the queue, its first rung and the delay queues as the remedy: what
// expires from a rung while the queue has no leader is dropped. Not on
// one node, not on a classic queue, not where the waits are on the delay
// queues or in the process.
func TestRungsOnClusterWarned(t *testing.T) {
	const warning = "this quorum queue's retries wait on classic rungs"
	quorum := map[string]any{"x-queue-type": "quorum"}
	onRungs := retry.Fixed(3, 5*time.Second).WithBrokerWaitThreshold(time.Second)
	for _, c := range []struct {
		name   string
		nodes  int
		args   map[string]any
		policy retry.Policy
		warned bool
	}{
		{"quorum on rungs, three nodes", 3, quorum, onRungs, true},
		{"quorum on rungs, one node", 1, quorum, onRungs, false},
		{"classic on rungs, three nodes", 3, nil, onRungs, false},
		{"quorum on the delay queues, three nodes", 3, quorum, onRungs.WithDelayQueues(true), false},
		{"quorum in the process, three nodes", 3, quorum, retry.Fixed(3, 5*time.Second).WithBrokerWaitThreshold(0), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			broker := memory.New()
			srv := &acemq.Server{Transport: clustered{broker.Connect(), c.nodes}, Retry: c.policy,
				Queues: map[string]acemq.QueueConfig{"orders": {Args: c.args}}}
			f := startOn(t, broker, srv, map[string]acemq.Handler{"orders": acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() })})
			got := f.logs.FilterMessageSnippet(warning).All()
			if !c.warned {
				if len(got) > 0 {
					t.Errorf("warned: %s", got[0].Message)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d warnings of rungs on a cluster, want 1", len(got))
			}
			fields := got[0].ContextMap()
			if fields["queue"] != "orders" || fields["rung"] != retry.RungName("orders", 5*time.Second) || fields["nodes"] != int64(3) {
				t.Errorf("the warning's fields are %v", fields)
			}
			if msg := got[0].Message; !strings.Contains(msg, "WithDelayQueues(true)") || !strings.Contains(msg, "dropped") {
				t.Errorf("the warning does not name the loss and the remedy: %s", msg)
			}
		})
	}
}
