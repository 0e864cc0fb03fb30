package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/brokertest"
)

// TestPrometheus runs the example on the memory transport and, when a
// broker is given, on RabbitMQ, and checks what the scrape returned: one
// word per outcome on both counters, and the two histograms by outcome.
// Not parallel: the example sets otel's global meter provider.
func TestPrometheus(t *testing.T) {
	brokertest.OnEachBroker(t, func(t *testing.T, url string) {
		var out bytes.Buffer
		if err := run(&out, url, ""); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		q := `queue="acemq.example.metrics"`
		for _, want := range []string{
			`acemq_messages_handled_total{outcome="accept",` + q + `} 2`,
			`acemq_messages_handled_total{outcome="retry",` + q + `} 4`,
			`acemq_messages_handled_total{outcome="exhausted",` + q + `} 1`,
			`acemq_messages_handled_total{outcome="rejected",` + q + `} 1`,
			`acemq_messages_handled_total{outcome="parked",` + q + `} 1`,
			`acemq_messages_dead_lettered_total{outcome="exhausted",` + q + `} 1`,
			`acemq_messages_dead_lettered_total{outcome="rejected",` + q + `} 1`,
			`acemq_messages_dead_lettered_total{outcome="parked",` + q + `} 1`,
			`acemq_retry_scheduled_total{` + q + `,where="process"} 4`,
			`acemq_handler_duration_seconds_count{outcome="retry",` + q + `} 4`,
			`acemq_message_age_seconds_count{outcome="accept",` + q + `} 2`,
		} {
			if !strings.Contains(out.String(), want+"\n") {
				t.Errorf("scrape lacks %s:\n%s", want, out.String())
			}
		}
	})
}
