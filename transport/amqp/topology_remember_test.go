package rabbitmq

import (
	"reflect"
	"testing"

	"github.com/acemq/acemq/transport"
)

// TestRememberLeavesExclusiveQueuesOut: a reconnect must not declare again
// an exclusive queue its owner may have deleted since (a breaker marker
// that would then say a closed breaker is open), nor a topology of only
// exclusive queues; what else the topology held is replayed as before.
func TestRememberLeavesExclusiveQueuesOut(t *testing.T) {
	var tp topologies
	mine := transport.Queue{Name: "orders.breaker.i", Exclusive: true}
	work := transport.Queue{Name: "orders", Durable: true}
	tp.remember(transport.Topology{Queues: []transport.Queue{mine}})
	if len(tp.done) != 0 {
		t.Fatalf("a topology of one exclusive queue was kept for replay: %+v", tp.done)
	}
	both := transport.Topology{Queues: []transport.Queue{mine, work}}
	tp.remember(both)
	want := []transport.Topology{{Queues: []transport.Queue{work}}}
	if !reflect.DeepEqual(tp.done, want) {
		t.Fatalf("kept %+v, want %+v", tp.done, want)
	}
	if len(both.Queues) != 2 {
		t.Fatalf("remember changed the caller's topology: %+v", both)
	}
}
