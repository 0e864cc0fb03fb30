package rabbitmq

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A queue with a home node is declared through that node's URL; one
// whose home node does not answer is declared all the same, through the
// transport's own connection, with a warning that names the queue and
// the node and never the node's password. (That the leader then sits on
// the home node is checked on a three-node cluster:
// TestFaultPartitionLeaderKilled.)
func TestDeclareAtHome(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	const secret = "s3cr3t-home"
	dead := fmt.Sprintf("amqp://acemq:%s@127.0.0.1:1/", secret) // nothing listens on port 1
	tr := dial(t, WithURLs(dead), WithLogger(zap.New(core)), WithDialTimeout(5*time.Second))
	at, away := fmt.Sprintf("acemq-test-home-%d", time.Now().UnixNano()), fmt.Sprintf("acemq-test-away-%d", time.Now().UnixNano())
	t.Cleanup(func() { deleteQueue(t, at); deleteQueue(t, away) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := map[string]any{"x-queue-type": "quorum"}
	// Homes count the URLs in sorted order: which of 1 and 2 is the broker.
	live, gone := 1, 2
	if dead < tr.cfg.urls[0] {
		live, gone = 2, 1
	}
	top := transport.Topology{Queues: []transport.Queue{
		{Name: at, Durable: true, Args: args, Home: live},
		{Name: away, Durable: true, Args: args, Home: gone},
	}}
	if err := tr.Declare(ctx, top); err != nil {
		t.Fatalf("Declare: %v", err)
	}
	for _, q := range []string{at, away} {
		if _, err := tr.Inspect(ctx, q); err != nil {
			t.Errorf("Inspect %s after the declare: %v", q, err)
		}
	}
	warned := logs.FilterMessageSnippet("did not answer").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings of a home node that did not answer, want 1: %v", len(warned), logs.All())
	}
	fields := warned[0].ContextMap()
	if fields["queue"] != away || fields["node"] != int64(gone) {
		t.Errorf("the warning names queue %v node %v, want %s node %d", fields["queue"], fields["node"], away, gone)
	}
	for _, e := range logs.All() {
		if strings.Contains(fmt.Sprint(e.Message, e.ContextMap()), secret) {
			t.Errorf("a log entry shows the home node's password: %s %v", e.Message, e.ContextMap())
		}
	}
}
