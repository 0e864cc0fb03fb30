package engine

import "testing"

// TestConsumerDestination: messaging.destination.name of a delivery, as
// RabbitMQ's conventions write it, from where the message was first
// published and the queue it was consumed from.
func TestConsumerDestination(t *testing.T) {
	t.Parallel()
	tests := []struct{ exchange, key, queue, want string }{
		{"", "orders", "orders", "orders"},
		{"", "", "orders", "orders"},
		{"events", "order.placed", "billing", "events:order.placed:billing"},
		{"events", "billing", "billing", "events:billing"},
		{"", "other", "orders", "other:orders"},
		{"fanout", "", "orders", "fanout:orders"},
	}
	for _, tt := range tests {
		if got := consumerDestination(tt.exchange, tt.key, tt.queue); got != tt.want {
			t.Errorf("consumerDestination(%q, %q, %q) = %q, want %q", tt.exchange, tt.key, tt.queue, got, tt.want)
		}
	}
}

// TestOutcomeVocabularyNames: every cause the decision gives a give-up
// has a word of its own, the one the dead-letter metric always used.
func TestOutcomeVocabularyNames(t *testing.T) {
	t.Parallel()
	for _, cause := range []string{"exhausted", "too_old", "rejected", "no_policy", "parked", "no_answer", "unwritable", "snooze_limit", "wait_too_long", "consumer_timeout"} {
		if o := giveUpOutcome(cause); o == outcomeGaveUp || o.String() != cause {
			t.Errorf("cause %q has outcome %v", cause, o)
		}
	}
	if o := giveUpOutcome("something_new"); o != outcomeGaveUp {
		t.Errorf("an unknown cause has outcome %v", o)
	}
	qm := newQueueMetrics("q")
	if s := qm.sets(outcomeGaveUp, "something_new"); s.attr.Value.AsString() != "something_new" {
		t.Errorf("an unknown cause is reported as %v", s.attr)
	}
}
