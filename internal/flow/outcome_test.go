package flow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/flow"
	"github.com/acemq/acemq/transport/memory"
)

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	onlyWarehouse := func(err error) bool { return errors.Is(err, errWarehouse) }
	other := errors.New("the tax service is slow")
	tests := []struct {
		name   string
		a      ack.Ack
		counts func(error) bool
		want   flow.Outcome
	}{
		{"accept is a success", ack.Accept(), nil, flow.Success},
		{"a retry's error counts", ack.Retry(errWarehouse), nil, flow.Failure},
		{"a wrapped retry's error counts", ack.Retry(fmt.Errorf("reserve stock: %w", errWarehouse)), nil, flow.Failure},
		{"a retry after a wait counts", ack.RetryAfter(time.Minute, errWarehouse), nil, flow.Failure},
		{"a handler timeout counts", ack.Retry(context.DeadlineExceeded), nil, flow.Failure},
		{"a requeue counts", ack.Requeue(), nil, flow.Failure},
		{"a fatal error is the message's fault", ack.Retry(ack.Fatal(errWarehouse)), nil, flow.Ignored},
		{"a fatal error wrapped", ack.Retry(fmt.Errorf("order 7: %w", ack.Fatal(other))), nil, flow.Ignored},
		{"a handler cut off by the stop", ack.Retry(fmt.Errorf("reserve: %w", context.Canceled)), nil, flow.Ignored},
		{"a rejection is the message's fault", ack.DeadLetter(errWarehouse), nil, flow.Ignored},
		{"a park is the message's fault", ack.Park(errWarehouse), nil, flow.Ignored},
		{"an undecodable body", ack.Undecodable(errWarehouse), nil, flow.Ignored},
		{"too old", ack.TooOld(time.Hour, errWarehouse), nil, flow.Ignored},
		{"a snooze is no failure", ack.Snooze(time.Minute), nil, flow.Ignored},
		{"no answer", ack.Ack{}, nil, flow.Ignored},
		{"a predicate: the warehouse counts", ack.Retry(errWarehouse), onlyWarehouse, flow.Failure},
		{"a predicate: the tax service does not", ack.Retry(other), onlyWarehouse, flow.Ignored},
		{"a predicate: asked about a requeue", ack.Requeue(), func(err error) bool { return err == flow.ErrRequeued }, flow.Failure},
		{"a predicate cannot make a rejection count", ack.DeadLetter(errWarehouse), onlyWarehouse, flow.Ignored},
		{"a predicate cannot make an accept fail", ack.Accept(), func(error) bool { return true }, flow.Success},
		{"a predicate may count a fatal error", ack.Retry(ack.Fatal(errWarehouse)), onlyWarehouse, flow.Failure},
	}
	for _, tt := range tests {
		if got := flow.OutcomeOf(tt.a, tt.counts); got != tt.want {
			t.Errorf("%s: OutcomeOf(%v) = %s, want %s", tt.name, tt.a, got, tt.want)
		}
	}
}

// The breaker's own predicate decides what Done counts: failures of a
// dependency it was not told about leave it closed.
func TestBreakerDoneUsesThePredicate(t *testing.T) {
	t.Parallel()
	clock := memory.NewClock(time.Time{})
	b, err := flow.NewBreaker(clock, flow.BreakerSettings{Window: 4, Counts: func(err error) bool { return errors.Is(err, errWarehouse) }})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		b.Done(b.Allow().Permit, ack.Retry(errors.New("the tax service is slow")))
		b.Done(b.Allow().Permit, ack.DeadLetter(errWarehouse))
		b.Done(b.Allow().Permit, ack.Retry(ack.Fatal(errors.New("no such customer"))))
	}
	if st := b.Status(); st.State != flow.Closed || st.Outcomes != 0 {
		t.Fatalf("after failures nobody counts: %+v, want closed with an empty window", st)
	}
	var ev flow.Event
	for range 4 {
		ev = b.Done(b.Allow().Permit, ack.Retry(errWarehouse))
	}
	if ev.To != flow.Open || ev.Err != errWarehouse {
		t.Fatalf("four warehouse failures: %v, want open", ev)
	}
}

func TestDefaultCounts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want bool
	}{
		{errWarehouse, true},
		{flow.ErrRequeued, true},
		{context.DeadlineExceeded, true},
		{ack.Fatal(errWarehouse), false},
		{fmt.Errorf("stop: %w", context.Canceled), false},
	}
	for _, tt := range tests {
		if got := flow.DefaultCounts(tt.err); got != tt.want {
			t.Errorf("DefaultCounts(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ got, want string }{
		{flow.Closed.String(), "closed"}, {flow.Open.String(), "open"}, {flow.HalfOpen.String(), "half-open"},
		{flow.State(9).String(), "state(9)"},
		{flow.Success.String(), "success"}, {flow.Failure.String(), "failure"}, {flow.Ignored.String(), "ignored"},
	} {
		if tt.got != tt.want {
			t.Errorf("%q, want %q", tt.got, tt.want)
		}
	}
}
