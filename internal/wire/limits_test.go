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

// TestTrimKeepsWhatAlwaysFits: a trimmed copy carries the contract's
// headers (long strings cut), no other header, and no short-string
// property too long to write; the body stays whole.
func TestTrimKeepsWhatAlwaysFits(t *testing.T) {
	t.Parallel()
	body := []byte(strings.Repeat("b", 1<<20))
	p := wire.Copy(transport.Delivery{
		Headers:    map[string]any{"blob": strings.Repeat("x", 200000), "trace": "t"},
		Properties: transport.Properties{CorrelationID: strings.Repeat("c", 300), ContentType: "application/json"},
		Body:       body,
	}, wire.Envelope{ID: strings.Repeat("i", 5000), Attempt: 2}, "q.parked", 2, "could not be written: headers is 200400, over the limit of 129016")
	got := wire.Trim(p)
	if _, ok := got.Headers["blob"]; ok || got.Headers["trace"] != nil {
		t.Errorf("kept an application header: %v", got.Headers)
	}
	if id, _ := got.Headers[wire.ID].(string); len(id) != 4096 || got.Headers[wire.Attempt] != int64(2) || got.Headers[wire.Error] == nil {
		t.Errorf("contract headers: id %d bytes, attempt %v, error %v", len(id), got.Headers[wire.Attempt], got.Headers[wire.Error])
	}
	if got.CorrelationID != "" || got.ContentType != "application/json" || len(got.Body) != len(body) || got.RoutingKey != "q.parked" {
		t.Errorf("properties %+v, body %d bytes", got.Properties, len(got.Body))
	}
	if len(p.Headers) != 8 {
		t.Errorf("Trim changed the copy it was given: %d headers", len(p.Headers))
	}
}

// TestForwardCarriesNothingTheBrokerOwns: a message forwarded as it is
// (the delay infrastructure's redelivery) keeps its body, properties and
// application headers, and none of the broker's own: no x-death, no
// per-message TTL, no user id another user would be refused for.
func TestForwardCarriesNothingTheBrokerOwns(t *testing.T) {
	t.Parallel()
	d := transport.Delivery{
		Headers: map[string]any{"x-death": []any{map[string]any{"queue": "acemq.delay.v1.00"}}, "x-first-death-queue": "q",
			"tenant": "t-1", wire.ID: "m-1"},
		Properties: transport.Properties{UserID: "someone-else", Expiration: "60000", CorrelationID: "c-1"},
		Body:       []byte("{}"),
	}
	p := wire.Forward(d, "acemq.delay.v1.deliver", "0.1.q", 0)
	if _, ok := p.Headers["x-death"]; ok || p.Headers["x-first-death-queue"] != nil || p.Headers["tenant"] != "t-1" || p.Headers[wire.ID] != "m-1" {
		t.Errorf("headers %v", p.Headers)
	}
	if p.UserID != "" || p.Expiration != "" || p.CorrelationID != "c-1" || p.DeliveryMode != 2 || !p.Mandatory ||
		p.Exchange != "acemq.delay.v1.deliver" || p.RoutingKey != "0.1.q" || string(p.Body) != "{}" {
		t.Errorf("forwarded %+v", p)
	}
	if _, ok := d.Headers["x-death"]; !ok {
		t.Error("Forward changed the delivery's headers")
	}
}
