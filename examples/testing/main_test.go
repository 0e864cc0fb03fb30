package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/retry"
)

// scriptedMailer fails its first failures sends with err, then records.
type scriptedMailer struct {
	failures int
	err      error

	mu    sync.Mutex
	calls int
	sent  []string
}

func (s *scriptedMailer) Send(_ context.Context, to, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls++; s.calls <= s.failures {
		return s.err
	}
	s.sent = append(s.sent, to)
	return nil
}

func (s *scriptedMailer) counts() (calls, sent int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, len(s.sent)
}

var errBusy = errors.New("smtp: 421")

// TestReminders runs the service's mux as it runs in production, on the
// memory transport, and runs the clock until nothing is pending: every
// wait of the ladder, jittered or not, is spent in milliseconds.
func TestReminders(t *testing.T) {
	t.Parallel()
	ada := Reminder{User: "ada", Text: "standup at ten"}
	for _, tc := range []struct {
		name        string
		mail        *scriptedMailer
		body        any
		calls, sent int
		dead        string // the reason in reminders.dlq
		parked      string // the start of the reason in reminders.parked
	}{
		{name: "sent at once", mail: &scriptedMailer{}, body: ada, calls: 1, sent: 1},
		{name: "sent on the fifth attempt", mail: &scriptedMailer{failures: 4, err: errBusy}, body: ada, calls: 5, sent: 1},
		{name: "given up on after five attempts", mail: &scriptedMailer{failures: 5, err: errBusy}, body: ada, calls: 5,
			dead: "exhausted 5 attempts: smtp: 421"},
		{name: "no such user is dead-lettered at once", mail: &scriptedMailer{failures: 1, err: ErrNoSuchUser}, body: ada, calls: 1,
			dead: "the handler rejected it: no such user"},
		{name: "not JSON is parked", mail: &scriptedMailer{}, body: []byte("reminder: standup"),
			parked: "could not be decoded: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := acemqtest.NewServer(t, NewMux(tc.mail), &acemq.Server{Retry: Policy})
			ts.Publish(t, Queue, tc.body)
			ts.RunUntilIdle(t)
			if calls, sent := tc.mail.counts(); calls != tc.calls || sent != tc.sent {
				t.Errorf("%d sends tried, %d sent; want %d and %d", calls, sent, tc.calls, tc.sent)
			}
			check := func(got []acemqtest.Queued, want string) {
				t.Helper()
				switch {
				case want == "" && len(got) > 0:
					t.Errorf("%s: %q", got[0].Queue, got[0].Reason())
				case want != "" && (len(got) != 1 || !strings.HasPrefix(got[0].Reason(), want)):
					t.Errorf("got %+v, want one message whose reason is %q", got, want)
				}
			}
			check(ts.DeadLetters(Queue), tc.dead)
			check(ts.Parked(Queue), tc.parked)
		})
	}
}

// TestTheLadderInMilliseconds walks the five-minute ladder step by step:
// the first wait in the process, the next three on rungs, where Await
// finds each copy.
func TestTheLadderInMilliseconds(t *testing.T) {
	t.Parallel()
	mail := &scriptedMailer{failures: 4, err: errBusy}
	ts := acemqtest.NewServer(t, NewMux(mail), &acemq.Server{Retry: Policy})
	ts.Publish(t, Queue, Reminder{User: "ada", Text: "standup at ten"})
	start := ts.Broker.Clock().Now()
	for i, step := range Policy.Schedule() {
		if step.Where != retry.OnRung {
			continue
		}
		waiting := ts.Await(t, retry.RungName(Queue, step.Delay), 1)[0]
		if calls, _ := mail.counts(); waiting.Envelope.Attempt != i+2 || calls != i+1 {
			t.Errorf("attempt %d on %s after %d sends, want attempt %d after %d", waiting.Envelope.Attempt, waiting.Queue, calls, i+2, i+1)
		}
	}
	ts.RunUntilIdle(t)
	took := ts.Broker.Clock().Now().Sub(start)
	if _, sent := mail.counts(); sent != 1 {
		t.Fatal("not sent on the fifth attempt")
	}
	// 20s ±20% in the process, 40s + 1m20s + 2m40s on the rungs.
	if took < 296*time.Second || took > 304*time.Second {
		t.Errorf("the ladder took %v of virtual time, want five minutes give or take the jitter", took)
	}
}

// TestTheVerdictOnEachAttempt holds the handler and the policy to what the
// server does with each attempt, with no broker at all.
func TestTheVerdictOnEachAttempt(t *testing.T) {
	t.Parallel()
	srv := &acemq.Server{Handler: NewMux(&scriptedMailer{failures: 10, err: errBusy}), Retry: Policy.WithJitter(0)}
	body := []byte(`{"user":"ada","text":"standup at ten"}`)
	for _, tc := range []struct {
		attempt int
		want    acemq.Verdict
	}{
		{1, acemq.Verdict{Settle: "copy", To: Queue, Attempt: 2, Wait: 20 * time.Second, Where: retry.InProcess}},
		{2, acemq.Verdict{Settle: "copy", To: Queue + ".retry.40s", Attempt: 3, Wait: 40 * time.Second, Where: retry.OnRung}},
		{4, acemq.Verdict{Settle: "copy", To: Queue + ".retry.2m40s", Attempt: 5, Wait: 160 * time.Second, Where: retry.OnRung}},
		{5, acemq.Verdict{Settle: "copy", To: Queue + ".dlq", Attempt: 5, Cause: "exhausted", Reason: "exhausted 5 attempts: smtp: 421"}},
	} {
		m := acemq.NewMessage(Queue, body, map[string]any{acemq.HeaderAttempt: tc.attempt})
		if got := acemqtest.Serve(context.Background(), t, srv, m).Verdict; got != tc.want {
			t.Errorf("attempt %d:\n %+v, want\n %+v", tc.attempt, got, tc.want)
		}
	}
}
