package acemq_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
)

// TestVerdictSettleIsAConstant: each way a delivery ends is one of the
// Settlement constants, a single word, and none is one of the outcome
// words the wire contract has (a dead letter's cause).
func TestVerdictSettleIsAConstant(t *testing.T) {
	t.Parallel()
	srv := &acemq.Server{Retry: retry.Fixed(3, time.Second)}
	now := time.Now()
	env := acemq.Envelope{Attempt: 1, CreatedAt: now}
	for _, tt := range []struct {
		answer ack.Ack
		want   acemq.Settlement
	}{
		{ack.Accept(), acemq.SettleAck},
		{ack.Requeue(), acemq.SettleGiveBack},
		{ack.Retry(errors.New("down")), acemq.SettleCopy},
		{ack.DeadLetter(errors.New("no such customer")), acemq.SettleCopy},
	} {
		if got := srv.Decide("orders", env, tt.answer, now).Settle; got != tt.want {
			t.Errorf("%v: Settle = %q, want %q", tt.answer.Outcome(), got, tt.want)
		}
	}
	causes := []string{"exhausted", "too_old", "rejected", "no_policy", "parked", "no_answer", "consumer_timeout", "unwritable", "snooze_limit", "wait_too_long"}
	for _, s := range []acemq.Settlement{acemq.SettleAck, acemq.SettleGiveBack, acemq.SettleCopy} {
		if strings.ContainsAny(string(s), " \t") {
			t.Errorf("settlement %q has a space", s)
		}
		for _, c := range causes {
			if string(s) == c {
				t.Errorf("settlement %q is the wire's outcome word %q", s, c)
			}
		}
	}
}
