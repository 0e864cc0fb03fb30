package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

// Example_snoozeAndRetryAfter schedules a reminder for tomorrow, lets the handler put it
// off for six hours without spending an attempt, and then retry it after
// the wait a partner asked for: a day and a half in milliseconds, on the
// memory transport's virtual clock, the waits all on the delay queues.
func Example_snoozeAndRetryAfter() {
	broker := memory.New()
	defer broker.Close()
	conn := broker.Connect()
	defer conn.Close()

	seen := make(chan string, 10)
	mux := acemq.NewMux()
	mux.HandleFunc("reminders", func(ctx context.Context, m *acemq.Message) ack.Ack {
		env := m.Envelope()
		seen <- fmt.Sprintf("attempt %d, snoozed %d times", env.Attempt, env.Snoozes)
		switch {
		case env.Snoozes == 0:
			return ack.Snooze(6 * time.Hour) // not yet: the customer is asleep
		case env.Attempt == 1:
			return ack.RetryAfter(90*time.Minute, errors.New("sms gateway: 429, retry after 5400 s"))
		}
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: conn, Handler: mux, Retry: retry.Exponential(5, time.Second, time.Minute)}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	<-srv.Ready() // declared and subscribed

	pub := &acemq.Publisher{Transport: conn, Mandatory: true}
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "reminders", Body: []byte("call ada"), Delay: 24 * time.Hour}); err != nil {
		fmt.Println(err)
	}
	for _, wait := range []time.Duration{24 * time.Hour, 6 * time.Hour, 90 * time.Minute} {
		waitFor(func() bool { return onLevel(broker) != "" }) // waiting in the broker, on no consumer
		broker.Clock().Advance(wait)
		fmt.Println(<-seen)
	}

	srv.Shutdown(context.Background())
	<-done
	// Output:
	// attempt 1, snoozed 0 times
	// attempt 1, snoozed 1 times
	// attempt 2, snoozed 1 times
}
