package acemq_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/metrictest"
	"github.com/acemq/acemq/retry"
)

// answerSeq answers each delivery in turn with the next of answers, and
// accepts once they run out.
func answerSeq(answers ...ack.Ack) *recorder {
	var n atomic.Int64
	return &recorder{answer: func(*acemq.Message) ack.Ack {
		if i := int(n.Add(1)) - 1; i < len(answers) {
			return answers[i]
		}
		return ack.Accept()
	}}
}

// TestOutcomeVocabulary: the process span's outcome, the outcome
// attribute of acemq.messages.handled and of the two histograms, and
// acemq.messages.dead.lettered.total's are one word for one settlement.
func TestOutcomeVocabulary(t *testing.T) {
	t.Parallel()
	var zero ack.Ack
	tests := []struct {
		answer     ack.Ack
		policy     retry.Policy
		deliveries int           // deliveries before the message is settled for good
		advance    time.Duration // the clock moved after the first
		outcome    string
		to         string
		failed     bool
		gaveUp     bool
	}{
		{answer: ack.Accept(), deliveries: 1, outcome: "accept"},
		{answer: ack.DeadLetter(errors.New("no such customer")), deliveries: 1, outcome: "rejected", to: "orders.dlq", failed: true, gaveUp: true},
		{answer: ack.Park(errors.New("not JSON")), deliveries: 1, outcome: "parked", to: "orders.parked", failed: true, gaveUp: true},
		{answer: zero, deliveries: 1, outcome: "no_answer", to: "orders.dlq", failed: true, gaveUp: true},
		{answer: ack.Retry(errBoom), deliveries: 1, outcome: "no_policy", to: "orders.dlq", failed: true, gaveUp: true},
		{answer: ack.Retry(errBoom), policy: retry.Fixed(2, time.Second), deliveries: 2, advance: time.Second, outcome: "retry", to: "orders", failed: true},
		{answer: ack.Snooze(time.Second), deliveries: 2, advance: time.Second, outcome: "snooze", to: "orders"},
		{answer: ack.Requeue(), deliveries: 2, outcome: "requeue", failed: true},
	}
	for _, tt := range tests {
		t.Run(tt.outcome, func(t *testing.T) {
			t.Parallel()
			rec, tp := tracing(t)
			f := start(t, &acemq.Server{Retry: tt.policy, TracerProvider: tp}, map[string]acemq.Handler{"orders": answerSeq(tt.answer)})
			f.publish("orders", "{}", nil)
			if tt.advance > 0 {
				f.eventually("the first attempt", func() bool { return started(rec, "process orders") == 1 })
				f.advance(1, tt.advance)
			}
			f.eventually("settled", func() bool { return len(named(rec, "process orders")) == tt.deliveries })
			first := named(rec, "process orders")[0]
			if got := attr(first, "acemq.outcome").AsString(); got != tt.outcome {
				t.Errorf("span outcome %q, want %q", got, tt.outcome)
			}
			if got := attr(first, "acemq.to").AsString(); got != tt.to {
				t.Errorf("span to %q, want %q", got, tt.to)
			}
			if failed := first.Status().Code == codes.Error; failed != tt.failed || (failed && attr(first, "error.type").AsString() != tt.outcome) {
				t.Errorf("status %v error.type %v", first.Status(), attr(first, "error.type"))
			}
			f.eventually("counted", func() bool {
				return f.counter(acemq.MetricHandled, map[string]string{"queue": "orders"}) == int64(tt.deliveries)
			})
			f.counterReaches(acemq.MetricHandled, map[string]string{"queue": "orders", "outcome": tt.outcome}, 1)
			want := int64(0)
			if tt.gaveUp {
				want = 1
			}
			if got := f.counter(acemq.MetricDeadLettered, map[string]string{"queue": "orders", "outcome": tt.outcome}); got != want {
				t.Errorf("dead.lettered{%s} = %d, want %d", tt.outcome, got, want)
			}
			if got := f.counter(acemq.MetricDeadLettered, nil); got != want {
				t.Errorf("dead.lettered = %d, want %d", got, want)
			}
			for _, name := range []string{acemq.MetricDuration, acemq.MetricAge} {
				if n, _ := f.histogram(name, map[string]string{"queue": "orders", "outcome": tt.outcome}); n != 1 {
					t.Errorf("%s{%s} has %d points, want 1", name, tt.outcome, n)
				}
			}
		})
	}
}

// TestHistograms: the handler's duration and the message's age when its
// delivery was settled, by queue and outcome. The age runs on the
// server's clock from x-acemq-created, across retries: a message retried
// after a second in the process was a second old at either settlement.
func TestHistograms(t *testing.T) {
	t.Parallel()
	f := start(t, &acemq.Server{Retry: retry.Fixed(2, time.Second)}, map[string]acemq.Handler{"orders": answerSeq(ack.Retry(errBoom))})
	f.publish("orders", "{}", nil)
	f.advance(1, time.Second)
	// The retry's original is settled, and recorded (age last), once its
	// copy is confirmed, which may be after the copy was already handled.
	f.eventually("both settlements recorded", func() bool {
		n1, _ := f.histogram(acemq.MetricAge, map[string]string{"queue": "orders", "outcome": "retry"})
		n2, _ := f.histogram(acemq.MetricAge, map[string]string{"queue": "orders", "outcome": "accept"})
		return n1 > 0 && n2 > 0
	})
	for _, outcome := range []string{"retry", "accept"} {
		attrs := map[string]string{"queue": "orders", "outcome": outcome}
		if n, sum := f.histogram(acemq.MetricAge, attrs); n != 1 || sum != 1 {
			t.Errorf("age{%s}: %d points summing to %vs, want one of 1s", outcome, n, sum)
		}
		if n, sum := f.histogram(acemq.MetricDuration, attrs); n != 1 || sum < 0 || sum > 5 {
			t.Errorf("duration{%s}: %d points summing to %vs", outcome, n, sum)
		}
	}
}

// histogram returns the count and sum of a histogram's points whose
// attributes include every pair in attrs.
func (f *fixture) histogram(name string, attrs map[string]string) (uint64, float64) {
	f.t.Helper()
	return metrictest.Histogram(f.t, f.reader, name, attrs)
}
