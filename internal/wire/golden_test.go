package wire_test

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/internal/wire/wiretest"
	"github.com/acemq/acemq/transport"
)

// contract is the document these tests hold the package to.
const contract = "../../docs/wire-contract.md"

func TestTheDocumentNamesTheConstants(t *testing.T) {
	t.Parallel()
	doc := wiretest.Load(t, contract)
	consts := []string{wire.ID, wire.Attempt, wire.Error, wire.Created, wire.Exchange, wire.RoutingKey, wire.Snoozes, wire.Due}
	for _, c := range consts {
		if _, ok := doc.Headers[c]; !ok {
			t.Errorf("the constant %s is not in the document's headers table", c)
		}
	}
	for h := range doc.Headers {
		if !strings.Contains(strings.Join(consts, " "), h) {
			t.Errorf("the document's header %s has no constant in package wire", h)
		}
	}
	if !doc.Optional[wire.Error] || !doc.Optional[wire.Snoozes] || !doc.Optional[wire.Due] || len(doc.Optional) != 3 {
		t.Errorf("optional headers %v; the document puts all but %s, %s and %s on every message", doc.Optional, wire.Error, wire.Snoozes, wire.Due)
	}
}

func TestNewWritesWhatTheDocumentSays(t *testing.T) {
	t.Parallel()
	doc := wiretest.Load(t, contract)
	created := time.Date(2024, 3, 1, 9, 0, 0, 123_456_789, time.UTC)
	o := wire.Origin{ID: "order-17", Created: created, Exchange: "shop", RoutingKey: "orders.placed"}
	user := map[string]any{"tenant": "acme", "n": int32(4)}
	before := maps.Clone(user)
	pub := wire.New(o, user, transport.Properties{ContentType: "application/json", CorrelationID: "c-1"}, []byte("{}"))

	if err := doc.Check(pub.Headers, wiretest.Want{ID: o.ID, Attempt: 1, Created: created.UnixMilli(), Exchange: "shop", RoutingKey: "orders.placed"}); err != nil {
		t.Error(err)
	}
	if !maps.Equal(user, before) {
		t.Errorf("New wrote to the caller's headers: %v", user)
	}
	if pub.Headers["tenant"] != "acme" || pub.Headers["n"] != int32(4) {
		t.Errorf("the caller's headers were not kept as given: %v", pub.Headers)
	}
	want := transport.Properties{ContentType: "application/json", CorrelationID: "c-1", DeliveryMode: 2,
		MessageID: o.ID, Timestamp: time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)}
	if pub.Properties != want {
		t.Errorf("properties %+v, want %+v", pub.Properties, want)
	}
	if pub.Exchange != "shop" || pub.RoutingKey != "orders.placed" || !pub.Mandatory || string(pub.Body) != "{}" {
		t.Errorf("publishing to %q/%q mandatory %v body %q", pub.Exchange, pub.RoutingKey, pub.Mandatory, pub.Body)
	}
}

// delivery is a message as it comes back from a rung on its third attempt,
// written by a lenient producer and carrying everything the broker adds.
func delivery(doc wiretest.Doc) transport.Delivery {
	h := map[string]any{
		wire.ID: []byte("m-1"), wire.Attempt: int32(3), wire.Created: "2024-03-01T09:00:00.250Z",
		wire.Exchange: "shop", wire.RoutingKey: "orders.placed", wire.Error: "a stale reason",
		"tenant": "acme", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		// Near the broker's names, and not theirs: a copy keeps them.
		"cc": "kept", "x-deaths": "kept", "x-first-death": "kept", "x-delivery-counts": int64(1),
		"nested": map[string]any{"x-death": "kept inside a table"},
		// What RabbitMQ writes, whether or not the document lists it.
		"x-death": []any{}, "x-first-death-queue": "orders", "x-last-death-reason": "expired",
		"x-delivery-count": int64(2), "x-acquired-count": int64(2), "CC": []any{"audit"}, "BCC": []any{"audit"},
	}
	for _, o := range doc.BrokerOwned {
		if p, ok := strings.CutSuffix(o, "*"); ok {
			h[p+"queue"], h[p+"reason"], h[p+"exchange"] = "orders", "expired", "acemq.retry"
		} else {
			h[o] = []any{map[string]any{"queue": "orders.retry.40s", "count": int64(1)}}
		}
	}
	return transport.Delivery{
		Queue: "orders", Exchange: "acemq.retry", RoutingKey: "orders", Redelivered: true, Headers: h,
		Properties: transport.Properties{
			ContentType: "application/json", ContentEncoding: "gzip", DeliveryMode: 1, Priority: 3,
			CorrelationID: "c-1", ReplyTo: "replies", Expiration: "60000", MessageID: "m-1",
			Timestamp: time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC), Type: "order.placed", UserID: "someone-else", AppID: "shop",
		},
		Body: []byte(`{"n":1}`),
	}
}

func TestCopyWritesWhatTheDocumentSays(t *testing.T) {
	t.Parallel()
	doc := wiretest.Load(t, contract)
	tests := []struct {
		site    string
		attempt int
		reason  string
	}{
		{"a retry", 4, ""},
		{"a dead letter", 3, "exhausted 3 attempts: the warehouse is not answering"},
		{"a park", 3, "could not be decoded: acemq: this message is not JSON"},
		{"a replay", 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.site, func(t *testing.T) {
			t.Parallel()
			d := delivery(doc)
			env := wire.Read(d)
			pub := wire.Copy(d, env, "orders.dlq", tt.attempt, tt.reason)
			err := doc.Check(pub.Headers, wiretest.Want{ID: "m-1", Attempt: int64(tt.attempt),
				Created:  time.Date(2024, 3, 1, 9, 0, 0, 250e6, time.UTC).UnixMilli(),
				Exchange: "shop", RoutingKey: "orders.placed", GivenUp: tt.reason != ""})
			if err != nil {
				t.Error(err)
			}
			if tt.reason != "" && pub.Headers[wire.Error] != tt.reason {
				t.Errorf("x-acemq-error = %#v, want %q", pub.Headers[wire.Error], tt.reason)
			}
			if pub.Exchange != "" || pub.RoutingKey != "orders.dlq" || !pub.Mandatory || string(pub.Body) != `{"n":1}` {
				t.Errorf("copy to %q/%q mandatory %v body %q; the document says the default exchange, the queue, mandatory, the body",
					pub.Exchange, pub.RoutingKey, pub.Mandatory, pub.Body)
			}
		})
	}
}

func TestCopyDropsWhatTheDocumentSaysTheBrokerOwns(t *testing.T) {
	t.Parallel()
	doc := wiretest.Load(t, contract)
	d := delivery(doc)
	pub := wire.Copy(d, wire.Read(d), "orders", 2, "")
	for k, v := range d.Headers {
		got, kept := pub.Headers[k]
		switch {
		case wire.IsBrokerOwned(k) != doc.IsBrokerOwned(k):
			t.Errorf("IsBrokerOwned(%q) = %v; the document says %v", k, wire.IsBrokerOwned(k), doc.IsBrokerOwned(k))
		case doc.IsBrokerOwned(k) && kept:
			t.Errorf("the copy carries the broker's %s", k)
		case !doc.IsBrokerOwned(k) && !strings.HasPrefix(k, "x-acemq-") && !reflect.DeepEqual(got, v):
			t.Errorf("the copy has %s = %#v, want it kept as %#v", k, got, v)
		}
	}

	want := d.Properties
	want.DeliveryMode = 2 // "persistent"
	for _, p := range doc.BrokerProperties {
		f := reflect.ValueOf(&want).Elem().FieldByName(fieldName(p))
		if !f.IsValid() {
			t.Fatalf("the document's property %s is no field of transport.Properties", p)
		}
		f.SetZero()
	}
	if pub.Properties != want {
		t.Errorf("copy properties\n%+v, want\n%+v", pub.Properties, want)
	}

	d.MessageID = ""
	if got := wire.Copy(d, wire.Read(d), "orders", 2, "").MessageID; got != "m-1" {
		t.Errorf("a copy of a message with no message id has %q, want its x-acemq-id", got)
	}
}

// fieldName is transport.Properties' field for an AMQP property name:
// user_id is UserID.
func fieldName(amqp string) string {
	var b strings.Builder
	for w := range strings.SplitSeq(amqp, "_") {
		if w == "id" {
			b.WriteString("ID")
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// TestNewDropsWhatTheDocumentSaysTheBrokerOwns: a handler that passes a
// consumed message's headers on to Publish gives New the broker's headers
// and another message's life (its error, snoozes, due time). The new
// message carries none of them, whatever the document lists, and keeps the
// rest as given.
func TestNewDropsWhatTheDocumentSaysTheBrokerOwns(t *testing.T) {
	t.Parallel()
	doc := wiretest.Load(t, contract)
	given := delivery(doc).Headers
	given[wire.Snoozes], given[wire.Due] = int64(3), int64(1700000000000)
	given["x-received-from"] = []any{map[string]any{"uri": "amqp://upstream"}}
	pub := wire.New(wire.Origin{ID: "n-1", Created: time.UnixMilli(1700000000000), Exchange: "", RoutingKey: "shipping"}, given, transport.Properties{}, nil)
	if err := doc.Check(pub.Headers, wiretest.Want{ID: "n-1", Attempt: 1, Created: 1700000000000, RoutingKey: "shipping"}); err != nil {
		t.Error(err)
	}
	for k, v := range given {
		got, kept := pub.Headers[k]
		switch {
		case wire.IsBrokerOwned(k) != doc.IsBrokerOwned(k):
			t.Errorf("IsBrokerOwned(%q) = %v; the document says %v", k, wire.IsBrokerOwned(k), doc.IsBrokerOwned(k))
		case doc.IsBrokerOwned(k) && kept:
			t.Errorf("the new message carries the broker's %s", k)
		case k == wire.Error || k == wire.Snoozes || k == wire.Due:
			if kept {
				t.Errorf("the new message carries another message's %s = %#v", k, got)
			}
		case !doc.IsBrokerOwned(k) && !strings.HasPrefix(k, "x-acemq-") && !reflect.DeepEqual(got, v):
			t.Errorf("the new message has %s = %#v, want it kept as %#v", k, got, v)
		}
	}
	if len(given[wire.Error].(string)) == 0 {
		t.Fatal("the fixture lost its error")
	}
}
