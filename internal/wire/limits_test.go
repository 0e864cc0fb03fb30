package wire_test

import (
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/transport"
)

// TestLongIDNeverInMessageID: an id longer than an AMQP short string is
// carried by x-acemq-id alone; message-id, which cannot hold it, is left
// empty rather than written (which would kill the connection).
func TestLongIDNeverInMessageID(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("i", 256)
	if p := wire.New(wire.Origin{ID: long}, nil, transport.Properties{}, nil); p.MessageID != "" || p.Headers[wire.ID] != long {
		t.Errorf("New: message-id %q, x-acemq-id %v", p.MessageID, p.Headers[wire.ID])
	}
	if p := wire.Copy(transport.Delivery{}, wire.Envelope{ID: long}, "q.dlq", 1, "x"); p.MessageID != "" || p.Headers[wire.ID] != long {
		t.Errorf("Copy: message-id %q, x-acemq-id %v", p.MessageID, p.Headers[wire.ID])
	}
	fits := strings.Repeat("i", 255)
	if p := wire.Copy(transport.Delivery{}, wire.Envelope{ID: fits}, "q.dlq", 1, "x"); p.MessageID != fits {
		t.Errorf("Copy of a 255-byte id: message-id %q", p.MessageID)
	}
}

// TestNewDropsAProducersError: x-acemq-error is only on what was given up
// on; a producer's own does not ride on a new message.
func TestNewDropsAProducersError(t *testing.T) {
	t.Parallel()
	if p := wire.New(wire.Origin{ID: "m"}, map[string]any{wire.Error: "stale"}, transport.Properties{}, nil); p.Headers[wire.Error] != nil {
		t.Errorf("x-acemq-error = %v", p.Headers[wire.Error])
	}
}
