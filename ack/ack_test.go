package ack_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq/ack"
)

func TestReasons(t *testing.T) {
	t.Parallel()
	boom := errors.New("the warehouse is not answering")
	tests := []struct {
		a       ack.Ack
		outcome ack.Outcome
		reason  string
		cause   string
	}{
		{ack.Accept(), ack.OutcomeAccept, "", ""},
		{ack.Retry(boom), ack.OutcomeRetry, "", ""},
		{ack.Requeue(), ack.OutcomeRequeue, "", ""},
		{ack.DeadLetter(errors.New("no such customer")), ack.OutcomeDeadLetter, "the handler rejected it: no such customer", "rejected"},
		{ack.Park(errors.New("unknown schema")), ack.OutcomePark, "the handler parked it: unknown schema", "parked"},
		{ack.Park(errors.New("tenant 7 is not served here")), ack.OutcomePark, "the handler parked it: tenant 7 is not served here", "parked"},
		{ack.Park(nil), ack.OutcomePark, "the handler parked it: acemq: no reason given", "parked"},
		{ack.Undecodable(errors.New("invalid character '<'")), ack.OutcomePark, "could not be decoded: invalid character '<'", "parked"},
		{ack.Undecodable(nil), ack.OutcomePark, "could not be decoded: acemq: no reason given", "parked"},
		{ack.Ack{}, ack.OutcomeNone, "", ""},
		{ack.TooOld(6*time.Hour, boom), ack.OutcomeDeadLetter, "exceeded the maximum message age of 6h0m0s: the warehouse is not answering", "too_old"},
		{ack.DeadLetter(nil), ack.OutcomeDeadLetter, "the handler rejected it: acemq: no reason given", "rejected"},
	}
	for _, tt := range tests {
		if tt.a.Outcome() != tt.outcome || tt.a.Reason() != tt.reason || tt.a.Cause() != tt.cause {
			t.Errorf("%v: outcome %v reason %q cause %q; want %v %q %q", tt.a, tt.a.Outcome(), tt.a.Reason(), tt.a.Cause(), tt.outcome, tt.reason, tt.cause)
		}
	}
	if ack.Retry(nil).Err() == nil {
		t.Error("Retry(nil) lost the fact that something failed")
	}
}

func TestFatalSurvivesWrapping(t *testing.T) {
	t.Parallel()
	base := errors.New("no such customer, and there never will be")
	wrapped := fmt.Errorf("lookup: %w", ack.Fatal(base))
	if !ack.IsFatal(wrapped) || !errors.Is(wrapped, ack.ErrFatal) || !errors.Is(wrapped, base) {
		t.Errorf("the fatal mark or the cause was lost through wrapping: %v", wrapped)
	}
	if ack.IsFatal(base) || ack.Fatal(nil) != nil {
		t.Error("an unmarked error reads as fatal, or Fatal(nil) is not nil")
	}
	if wrapped.Error() != "lookup: no such customer, and there never will be" {
		t.Errorf("Fatal changed the text: %q", wrapped.Error())
	}
}

func ExampleDeadLetter() {
	a := ack.DeadLetter(errors.New("no such customer"))
	fmt.Println(a.Outcome())
	fmt.Println(a.Reason())
	// Output:
	// dead-letter
	// the handler rejected it: no such customer
}

func ExampleFatal() {
	err := fmt.Errorf("charge card: %w", ack.Fatal(errors.New("card account closed")))
	a := ack.Retry(err) // the server honours the mark over the request
	fmt.Println(a.Outcome(), ack.IsFatal(a.Err()))
	// Output: retry true
}

func ExampleAccept() {
	fmt.Println(ack.Accept())
	// Output: accept
}

func ExampleRetry() {
	a := ack.Retry(errors.New("the warehouse is not answering"))
	fmt.Println(a.Outcome(), "-", a.Err())
	// Output: retry - the warehouse is not answering
}

func ExamplePark() {
	a := ack.Park(errors.New("schema v9 is unknown here"))
	fmt.Println(a.Outcome())
	fmt.Println(a.Reason())
	// Output:
	// park
	// the handler parked it: schema v9 is unknown here
}

func ExampleUndecodable() {
	var order struct{ ID int }
	if err := json.Unmarshal([]byte("<order/>"), &order); err != nil {
		a := ack.Undecodable(err)
		fmt.Println(a.Outcome())
		fmt.Println(a.Reason())
	}
	// Output:
	// park
	// could not be decoded: invalid character '<' looking for beginning of value
}

func ExampleRequeue() {
	// Only for the obviously transient failure on an obviously short queue:
	// no delay and no limit.
	fmt.Println(ack.Requeue())
	// Output: requeue
}

func ExampleAck_zero() {
	// A middleware that forgets to return its next handler's answer
	// returns the zero Ack: no answer, which the server dead-letters.
	var a ack.Ack
	fmt.Println(a, a.Outcome() == ack.OutcomeAccept)
	// Output: none false
}
