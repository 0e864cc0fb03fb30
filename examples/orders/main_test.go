package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/brokertest"
)

// TestOrders runs the README's first command, on the memory transport and,
// when a broker is given, on RabbitMQ, and checks the story it tells.
func TestOrders(t *testing.T) {
	brokertest.OnEachBroker(t, func(t *testing.T, url string) {
		var out bytes.Buffer
		if err := run(&out, url); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		for _, want := range []string{
			"after attempt 3 wait 400ms  400ms on rung acemq.example.orders.retry.400ms",
			"order 1 attempt 1: accept",
			"order 2 attempt 3: accept",
			"order 3 attempt 4: accept",
			`{"id":4,"customer":"nobody","fail_times":0} (attempt 1): the handler rejected it: customer "nobody": no such customer`,
			`{"id":5,"customer":"ken","fail_times":99} (attempt 5): exhausted 5 attempts: the warehouse is not answering`,
			"<order id=6/> (attempt 1): could not be decoded: acemq: this message is not JSON",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})
}
