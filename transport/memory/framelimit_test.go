package memory_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/amqplimit"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// limitErr returns err's LimitError, failing the test when there is none.
func limitErr(t *testing.T, err error) *transport.LimitError {
	t.Helper()
	var le *transport.LimitError
	if !errors.As(err, &le) || !errors.Is(err, transport.ErrTooLarge) {
		t.Fatalf("error %v, want a *transport.LimitError", err)
	}
	return le
}

// TestMandatoryCountsTheSeqHeader: the amqp transport adds a header of
// its own to a mandatory publish, which counts against the frame and the
// entries; the memory transport counts it too, so that a publish refused
// there is refused here, at the same byte.
func TestMandatoryCountsTheSeqHeader(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	props := transport.Properties{DeliveryMode: 2, MessageID: "m"}
	base, err := amqplimit.Measure(&props, map[string]any{"pad": "", amqplimit.SeqHeader: int64(0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pad := func(extra int) map[string]any {
		return map[string]any{"pad": strings.Repeat("p", amqplimit.HeaderLimit(memory.FrameMax)-base+extra)}
	}
	f.publish(transport.Publishing{RoutingKey: "q", Mandatory: true, Headers: pad(0), Properties: props})
	_, err = f.c.Publish(f.ctx, transport.Publishing{RoutingKey: "q", Mandatory: true, Headers: pad(1), Properties: props})
	if le := limitErr(t, err); le.Field != "headers" || le.Size != amqplimit.HeaderLimit(memory.FrameMax)+1 {
		t.Errorf("LimitError %+v, want headers one byte over", *le)
	}
	// Without Mandatory there is no such header, and room for it.
	f.publish(transport.Publishing{RoutingKey: "q", Headers: pad(1), Properties: props})

	full := make(map[string]any, amqplimit.MaxEntries)
	for i := range amqplimit.MaxEntries {
		full[strconv.Itoa(i)] = true
	}
	f.publish(transport.Publishing{RoutingKey: "q", Headers: full})
	_, err = f.c.Publish(f.ctx, transport.Publishing{RoutingKey: "q", Mandatory: true, Headers: full})
	if le := limitErr(t, err); le.Field != "header-entries" || le.Size != amqplimit.MaxEntries+1 {
		t.Errorf("LimitError %+v, want header-entries %d", *le, amqplimit.MaxEntries+1)
	}
	if got := f.b.Depth("q"); got != 3 {
		t.Errorf("q holds %d messages, want the 3 accepted", got)
	}
}

// TestLimitsBeforeTheBroker: a limit is the client's, checked before the
// broker sees the message: a user-id that is both too long and not the
// connection's is too long, not refused by the broker.
func TestLimitsBeforeTheBroker(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	_, err := f.c.Publish(f.ctx, transport.Publishing{RoutingKey: "q",
		Properties: transport.Properties{UserID: strings.Repeat("u", 256), Expiration: "soon"}})
	if le := limitErr(t, err); le.Field != "user-id" {
		t.Errorf("LimitError %+v, want user-id", *le)
	}
	if !strings.Contains(err.Error(), `queue "q"`) {
		t.Errorf("error %q does not name the queue", err)
	}
}
