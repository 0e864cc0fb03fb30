package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/brokertest"
)

// TestOutbox runs the example on the memory transport and, when a broker is
// given, on RabbitMQ, and checks the story it tells. It needs PostgreSQL:
// it skips without ACEMQ_POSTGRES_URL, except under CI, where that fails.
func TestOutbox(t *testing.T) {
	pg := brokertest.PostgresURL(t)
	// One after the other: both runs share the example's tables.
	brokertest.OnEachBroker(t, func(t *testing.T, url string) {
		var out bytes.Buffer
		if err := run(&out, pg, url); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		got := out.String()
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`order \d+ committed with message [0-9a-f-]{36}`),
			regexp.MustCompile(`order for 0 × nothing by bob rolled back \(quantity 0: it must be positive\): no order row, no message`),
			regexp.MustCompile(`received order.placed for order \d+: \{"order_id":\d+,"customer":"ada","item":"espresso beans","quantity":2\} \(x-acemq-id [0-9a-f-]{36}, attempt 1\)`),
			regexp.MustCompile(`received order.placed for order \d+: \{"order_id":\d+,"customer":"cy"`),
			regexp.MustCompile(`outbox: 0 messages pending`),
		} {
			if !want.MatchString(got) {
				t.Errorf("output lacks %s:\n%s", want, got)
			}
		}
		if strings.Contains(got, `"customer":"bob"`) {
			t.Errorf("the rolled-back order was published:\n%s", got)
		}
	})
}
