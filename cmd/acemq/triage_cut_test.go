package main

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// TestTriageReplayCutOff: the node goes away with the fourth copy of a
// replay in flight (its confirm never comes, and the broker cannot be
// asked anything after): the move stops saying which message was in
// flight, the count after is "unknown", never a 0 the broker did not say
// (TestFaultNetsplitReplay saw "0 after" with 299 still in the .dlq), and
// the error's lines are lines, not a literal \n.
func TestTriageReplayCutOff(t *testing.T) {
	t.Parallel()
	reasons := make([]string, 10)
	for i := range reasons {
		reasons[i] = "exhausted 3 attempts: HTTP 503"
	}
	b, _ := memoryBroker(t, "orders", reasons...)
	var gone atomic.Bool
	dial := func(context.Context, string) (transport.Transport, error) { return goneAfter{b.Connect(), &gone}, nil }
	var n atomic.Int32
	b.SetPublishFault(func(p transport.Publishing) memory.Fault {
		if p.RoutingKey == "orders" && n.Add(1) == 4 {
			gone.Store(true) // the node goes away with the 4th copy in flight
			return memory.Drop
		}
		return memory.Deliver
	})
	code, out, errOut := cli(t, dial, "triage", "orders.dlq", "--url", "amqp://localhost/", "--replay", triage.ID(triage.Key(reasons[0])))
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(out, "after") || strings.Contains(out, " 0 after") || !strings.Contains(out, "unknown (the broker could not be asked) after") {
		t.Errorf("the count after, when the broker cannot be asked, is not said to be unknown:\n%s", out)
	}
	if strings.Contains(errOut, `\n`) {
		t.Errorf("a literal \\n in the error:\n%s", errOut)
	}
	if !strings.Contains(errOut, "publish outcome unknown") {
		t.Errorf("the error does not say the copy in flight has an unknown outcome:\n%s", errOut)
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errOut)
}

// goneAfter is a transport whose broker cannot be asked once gone is set.
type goneAfter struct {
	transport.Transport
	gone *atomic.Bool
}

func (g goneAfter) Inspect(ctx context.Context, q string) (transport.QueueInfo, error) {
	if g.gone.Load() {
		return transport.QueueInfo{}, errors.New("connection closed: CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'")
	}
	return g.Transport.Inspect(ctx, q)
}
