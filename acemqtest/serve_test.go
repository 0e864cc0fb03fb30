package acemqtest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/internal/tbtest"
	"github.com/acemq/acemq/retry"
)

type order struct {
	ID    int `json:"id"`
	Units int `json:"units"`
}

// orders is a handler of queue "orders": an order of no units is refused,
// an order of more than 100 units finds the warehouse down, and 666 units
// panics.
func orders() *acemq.Mux {
	mux := acemq.NewMux()
	mux.Handle("orders", acemq.Decoded(codec.JSON, func(_ context.Context, _ *acemq.Message, o order) ack.Ack {
		switch {
		case o.Units == 666:
			panic("the number of the beast")
		case o.Units == 0:
			return ack.DeadLetter(errNoUnits)
		case o.Units > 100:
			return ack.Retry(errDown)
		}
		return ack.Accept()
	}))
	return mux
}

var errNoUnits = ackError("an order of no units")

type ackError string

func (e ackError) Error() string { return string(e) }

func TestServe(t *testing.T) {
	t.Parallel()
	srv := &acemq.Server{Handler: orders(), Retry: retry.Exponential(4, 10*time.Second, 0).WithJitter(0)}
	body := func(units int) []byte { b, _ := json.Marshal(order{ID: 7, Units: units}); return b }
	attempt := func(n int) map[string]any { return map[string]any{acemq.HeaderAttempt: n} }
	for _, tc := range []struct {
		name    string
		body    []byte
		headers map[string]any
		outcome ack.Outcome
		want    acemq.Verdict
	}{
		{"accepted", body(3), nil, ack.OutcomeAccept, acemq.Verdict{Settle: "ack"}},
		{"retried in the process", body(300), nil, ack.OutcomeRetry,
			acemq.Verdict{Settle: "copy", To: "orders", Attempt: 2, Wait: 10 * time.Second, Where: retry.InProcess}},
		{"retried on a rung", body(300), attempt(3), ack.OutcomeRetry,
			acemq.Verdict{Settle: "copy", To: "orders.retry.40s", Attempt: 4, Wait: 40 * time.Second, Where: retry.OnRung}},
		{"exhausted", body(300), attempt(4), ack.OutcomeRetry,
			acemq.Verdict{Settle: "copy", To: "orders.dlq", Attempt: 4, Cause: "exhausted", Reason: "exhausted 4 attempts: " + errDown.Error()}},
		{"refused", body(0), nil, ack.OutcomeDeadLetter,
			acemq.Verdict{Settle: "copy", To: "orders.dlq", Attempt: 1, Cause: "rejected", Reason: "the handler rejected it: an order of no units"}},
		{"not JSON", []byte("seven"), nil, ack.OutcomePark,
			acemq.Verdict{Settle: "copy", To: "orders.parked", Attempt: 1, Cause: "parked"}},
		{"a panic is a retry", body(666), nil, ack.OutcomeRetry,
			acemq.Verdict{Settle: "copy", To: "orders", Attempt: 2, Wait: 10 * time.Second, Where: retry.InProcess}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := acemqtest.Serve(context.Background(), t, srv, acemq.NewMessage("orders", tc.body, tc.headers))
			if got.Ack.Outcome() != tc.outcome {
				t.Errorf("the handler answered %v, want %v", got.Ack, tc.outcome)
			}
			v := got.Verdict
			if tc.want.To == "orders.parked" { // the codec's words
				if !strings.HasPrefix(v.Reason, "could not be decoded: ") {
					t.Errorf("parked with reason %q", v.Reason)
				}
				v.Reason = ""
			}
			if v != tc.want {
				t.Errorf("verdict\n %+v, want\n %+v", v, tc.want)
			}
		})
	}
}

func TestServeRefusesAQueueTheHandlerDoesNotServe(t *testing.T) {
	t.Parallel()
	got := tbtest.Failure(t, func(tb testing.TB) {
		acemqtest.Serve(context.Background(), tb, &acemq.Server{Handler: orders()}, acemq.NewMessage("ordres", nil, nil))
	})
	if want := `serves no queue "ordres"`; !strings.Contains(got, want) {
		t.Errorf("failed with %q, want %q", got, want)
	}
}
