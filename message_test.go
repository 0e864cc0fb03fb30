package acemq_test

import (
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
)

func TestEnvelopeFromHeaders(t *testing.T) {
	t.Parallel()
	created := time.UnixMilli(1_700_000_000_000)
	tests := []struct {
		name    string
		headers map[string]any
		check   func(t *testing.T, e acemq.Envelope)
	}{
		{"contract headers", map[string]any{"x-acemq-id": "abc", "x-acemq-attempt": int64(3), "x-acemq-error": "why", "x-acemq-created": created.UnixMilli()},
			func(t *testing.T, e acemq.Envelope) {
				if e.ID != "abc" || e.Attempt != 3 || e.Error != "why" || !e.CreatedAt.Equal(created) {
					t.Errorf("envelope %+v", e)
				}
			}},
		{"no headers at all", nil, func(t *testing.T, e acemq.Envelope) {
			if e.ID == "" || e.Attempt != 1 || e.CreatedAt.IsZero() {
				t.Errorf("unsafe defaults: %+v", e)
			}
		}},
		{"attempt as int32, string, float", map[string]any{"x-acemq-attempt": int32(2)}, func(t *testing.T, e acemq.Envelope) {
			if e.Attempt != 2 {
				t.Errorf("attempt %d", e.Attempt)
			}
		}},
		{"attempt as a digit string", map[string]any{"x-acemq-attempt": " 4 "}, func(t *testing.T, e acemq.Envelope) {
			if e.Attempt != 4 {
				t.Errorf("attempt %d", e.Attempt)
			}
		}},
		{"attempt garbage", map[string]any{"x-acemq-attempt": "many"}, func(t *testing.T, e acemq.Envelope) {
			if e.Attempt != 1 {
				t.Errorf("attempt %d", e.Attempt)
			}
		}},
		{"attempt negative or zero", map[string]any{"x-acemq-attempt": int64(-7)}, func(t *testing.T, e acemq.Envelope) {
			if e.Attempt != 1 {
				t.Errorf("attempt %d", e.Attempt)
			}
		}},
		{"attempt huge", map[string]any{"x-acemq-attempt": int64(1 << 40)}, func(t *testing.T, e acemq.Envelope) {
			if e.Attempt != 1 {
				t.Errorf("attempt %d", e.Attempt)
			}
		}},
		{"attempt float NaN-free", map[string]any{"x-acemq-attempt": float64(2)}, func(t *testing.T, e acemq.Envelope) {
			if e.Attempt != 2 {
				t.Errorf("attempt %d", e.Attempt)
			}
		}},
		{"id of a wrong type", map[string]any{"x-acemq-id": 42}, func(t *testing.T, e acemq.Envelope) {
			if e.ID == "" {
				t.Error("no id")
			}
		}},
		{"id as bytes", map[string]any{"x-acemq-id": []byte("b-id")}, func(t *testing.T, e acemq.Envelope) {
			if e.ID != "b-id" {
				t.Errorf("id %q", e.ID)
			}
		}},
		{"created as RFC 3339", map[string]any{"x-acemq-created": created.UTC().Format(time.RFC3339Nano)}, func(t *testing.T, e acemq.Envelope) {
			if !e.CreatedAt.Equal(created) {
				t.Errorf("created %v", e.CreatedAt)
			}
		}},
		{"created garbage", map[string]any{"x-acemq-created": map[string]any{"x": 1}}, func(t *testing.T, e acemq.Envelope) {
			if e.CreatedAt.IsZero() {
				t.Error("zero creation time")
			}
		}},
		{"quorum delivery count", map[string]any{"x-delivery-count": int64(3)}, func(t *testing.T, e acemq.Envelope) {
			if e.DeliveryCount != 3 {
				t.Errorf("delivery count %d", e.DeliveryCount)
			}
		}},
		{"original exchange and key survive a rung", map[string]any{"x-acemq-exchange": "orders.x", "x-acemq-routing-key": "eu"}, func(t *testing.T, e acemq.Envelope) {
			if e.Exchange != "orders.x" || e.RoutingKey != "eu" || e.Queue != "q" {
				t.Errorf("envelope %+v", e)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t, acemq.NewMessage("q", []byte("{}"), tt.headers).Envelope())
		})
	}
}

func TestAgeIsTheMessages(t *testing.T) {
	t.Parallel()
	m := acemq.NewMessage("q", nil, map[string]any{"x-acemq-created": time.Now().Add(-time.Hour).UnixMilli()})
	if age := m.Age(); age < time.Hour || age > time.Hour+time.Minute {
		t.Errorf("Age() = %v, want about an hour", age)
	}
	future := acemq.NewMessage("q", nil, map[string]any{"x-acemq-created": time.Now().Add(time.Hour).UnixMilli()})
	if future.Age() != 0 {
		t.Errorf("a producer clock ahead of ours gave age %v, want 0", future.Age())
	}
	if !m.IsFirstAttempt() {
		t.Error("attempt 1 is the first")
	}
}

func TestHeadersIsACopy(t *testing.T) {
	t.Parallel()
	m := acemq.NewMessage("q", nil, map[string]any{"k": "v"})
	m.Headers()["k"] = "changed"
	if m.Header("k") != "v" {
		t.Error("Headers() handed out the message's own map")
	}
}

// TestEnvelopeOf reads deliveries as they sit in a queue: the contract's
// headers first, then the AMQP properties, and nothing made up.
func TestEnvelopeOf(t *testing.T) {
	t.Parallel()
	created := time.UnixMilli(1_700_000_000_000).UTC()
	stamped := time.Unix(1_600_000_000, 0).UTC()
	tests := []struct {
		name        string
		d           transport.Delivery
		id          string
		createdAt   time.Time
		exchange    string
		routingKey  string
		attempt     int
		redelivered bool
	}{
		{"contract headers win over properties",
			transport.Delivery{Queue: "q.dlq", Exchange: "acemq.dlx", RoutingKey: "q.dlq",
				Headers: map[string]any{acemq.HeaderID: "abc", acemq.HeaderAttempt: int64(4), acemq.HeaderCreated: created.UnixMilli(),
					acemq.HeaderExchange: "orders", acemq.HeaderRoutingKey: "q"},
				Properties: transport.Properties{MessageID: "other", Timestamp: stamped}},
			"abc", created, "orders", "q", 4, false},
		{"a foreign message: its message id and timestamp",
			transport.Delivery{Queue: "q", Exchange: "ex", RoutingKey: "k", Redelivered: true,
				Properties: transport.Properties{MessageID: "legacy-7", Timestamp: stamped}},
			"legacy-7", stamped, "ex", "k", 1, true},
		{"neither: empty id, zero time",
			transport.Delivery{Queue: "q", RoutingKey: "q"},
			"", time.Time{}, "", "q", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := acemq.EnvelopeOf(tt.d)
			if e.ID != tt.id || !e.CreatedAt.Equal(tt.createdAt) || e.Exchange != tt.exchange || e.RoutingKey != tt.routingKey ||
				e.Attempt != tt.attempt || e.Redelivered != tt.redelivered || e.Queue != tt.d.Queue {
				t.Errorf("EnvelopeOf = %+v", e)
			}
		})
	}
}
