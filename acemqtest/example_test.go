package acemqtest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

type Reminder struct {
	User string `json:"user"`
	Text string `json:"text"`
}

// reminders is a service's handler: the mail server is down, whatever is
// sent.
func reminders() *acemq.Mux {
	mux := acemq.NewMux()
	mux.Handle("reminders", acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, r Reminder) ack.Ack {
		return ack.Retry(errors.New("smtp: 421 try again later"))
	}))
	return mux
}

// A five-attempt ladder with jitter (1s, 2s, 4s, 8s, ±20%), every wait
// spent in milliseconds: RunUntilIdle moves the clock from timer to timer,
// so the test need not know how long each wait is.
func ExampleNewServer() {
	t := newExampleT() // in a test, the *testing.T
	defer t.end()

	ts := acemqtest.NewServer(t, reminders(), &acemq.Server{Retry: retry.Exponential(5, time.Second, time.Minute)})
	ts.Publish(t, "reminders", Reminder{User: "ada", Text: "standup at ten"})
	took := ts.RunUntilIdle(t)

	for _, m := range ts.DeadLetters("reminders") {
		fmt.Printf("%s: %s\n", m.Queue, m.Reason())
	}
	fmt.Println("within 12s to 18s of virtual time:", took >= 12*time.Second && took <= 18*time.Second)
	// Output:
	// reminders.dlq: exhausted 5 attempts: smtp: 421 try again later
	// within 12s to 18s of virtual time: true
}

// Await stops the clock where a message arrives: here on each rung of a
// ladder whose waits are long enough to be spent in the broker.
func ExampleServer_Await() {
	t := newExampleT()
	defer t.end()

	policy := retry.Exponential(4, 40*time.Second, time.Hour)
	ts := acemqtest.NewServer(t, reminders(), &acemq.Server{Retry: policy})
	ts.Publish(t, "reminders", Reminder{User: "ada"})
	for _, step := range policy.Schedule() {
		m := ts.Await(t, retry.RungName("reminders", step.Delay), 1)[0]
		fmt.Printf("attempt %d waits on %s\n", m.Envelope.Attempt, m.Queue)
	}
	// Output:
	// attempt 2 waits on reminders.retry.40s
	// attempt 3 waits on reminders.retry.1m20s
	// attempt 4 waits on reminders.retry.2m40s
}

// Advance moves the clock by as much as the test says, firing what falls
// due on the way; Advance(t, 0) lets the server handle what it was given.
func ExampleServer_Advance() {
	t := newExampleT()
	defer t.end()

	ts := acemqtest.NewServer(t, reminders(), &acemq.Server{Retry: retry.Fixed(3, time.Minute)})
	ts.Publish(t, "reminders", Reminder{User: "ada"})
	ts.Advance(t, 0)
	fmt.Println("after 0:", len(ts.DeadLetters("reminders")), "dead letters")
	ts.Advance(t, time.Minute)
	fmt.Println("after 1m:", len(ts.DeadLetters("reminders")), "dead letters")
	ts.Advance(t, time.Minute)
	fmt.Println("after 2m:", len(ts.DeadLetters("reminders")), "dead letter")
	// Output:
	// after 0: 0 dead letters
	// after 1m: 0 dead letters
	// after 2m: 1 dead letter
}

// Serve holds a handler and a policy to the verdict on each attempt, with
// no broker.
func ExampleServe() {
	srv := &acemq.Server{Handler: reminders(), Retry: retry.Exponential(4, 10*time.Second, 0).WithJitter(0)}
	body := []byte(`{"user":"ada","text":"standup at ten"}`)
	for attempt := 1; attempt <= 4; attempt++ {
		m := acemq.NewMessage("reminders", body, map[string]any{acemq.HeaderAttempt: attempt})
		v := acemqtest.Serve(context.Background(), newExampleT(), srv, m).Verdict
		if v.Cause != "" {
			fmt.Printf("attempt %d: %s to %s\n", attempt, v.Cause, v.To)
			continue
		}
		fmt.Printf("attempt %d: wait %v in the %s\n", attempt, v.Wait, v.Where)
	}
	v := acemqtest.Serve(context.Background(), newExampleT(), srv, acemq.NewMessage("reminders", []byte("standup?"), nil)).Verdict
	fmt.Printf("not JSON: %s to %s\n", v.Cause, v.To)
	// Output:
	// attempt 1: wait 10s in the process
	// attempt 2: wait 20s in the process
	// attempt 3: wait 40s in the rung
	// attempt 4: exhausted to reminders.dlq
	// not JSON: parked to reminders.parked
}

// The broker refuses on purpose: the first dead letter is nacked, and the
// server publishes it again, after a backoff in real time that
// RunUntilIdle waits out.
func Example_faults() {
	t := newExampleT()
	defer t.end()

	ts := acemqtest.NewServer(t, reminders(), nil) // no policy: a retry is dead-lettered
	ts.Broker.SetPublishFault(memory.FaultNext("reminders.dlq", memory.Nack))
	ts.Publish(t, "reminders", Reminder{User: "ada"})
	ts.RunUntilIdle(t)
	fmt.Println(ts.DeadLetters("reminders")[0].Reason())
	// Output:
	// retry requested but no retry policy is set, so one delivery is all it gets: smtp: 421 try again later
}
