// Command testing is a small reminder service whose handler is tested, in
// main_test.go, with package acemqtest: the test walks a five-minute retry
// ladder in milliseconds on the memory transport's virtual clock, jitter
// and all, with no sleep and no harness of its own.
//
//	go test ./examples/testing
//	go run ./examples/testing
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

// Reminder is the message body.
type Reminder struct {
	User string `json:"user"`
	Text string `json:"text"`
}

// Mailer sends mail; the test's fake fails on purpose.
type Mailer interface {
	Send(ctx context.Context, to, text string) error
}

// ErrNoSuchUser is an error no retry can fix.
var ErrNoSuchUser = errors.New("no such user")

// Queue is the queue reminders arrive on.
const Queue = "reminders"

// Policy is the service's ladder: 20s, 40s, 1m20s, 2m40s — five minutes in
// all, the first wait held in the process (jittered ±20%), the last three
// on rung queues in the broker.
var Policy = retry.Exponential(5, 20*time.Second, 5*time.Minute)

// NewMux wires the handler the way the service runs it.
func NewMux(mail Mailer) *acemq.Mux {
	mux := acemq.NewMux()
	mux.Use(middleware.Decode(codec.JSON), middleware.Recover())
	mux.Handle(Queue, acemq.Decoded(codec.JSON, func(ctx context.Context, m *acemq.Message, r Reminder) ack.Ack {
		err := mail.Send(ctx, r.User, r.Text)
		switch {
		case errors.Is(err, ErrNoSuchUser):
			return ack.DeadLetter(err)
		case err != nil:
			return ack.Retry(err)
		}
		return ack.Accept()
	}))
	return mux
}

// flakyMailer fails its first n sends.
type flakyMailer struct{ left atomic.Int32 }

func (f *flakyMailer) Send(_ context.Context, to, text string) error {
	if f.left.Add(-1) >= 0 {
		return errors.New("smtp: 421 try again later")
	}
	fmt.Printf("mailed %s: %s\n", to, text)
	return nil
}

func main() {
	broker := memory.New(memory.WithRealClock())
	defer broker.Close()
	conn := broker.Connect()
	defer conn.Close()
	mail := &flakyMailer{}
	srv := &acemq.Server{Transport: conn, Handler: NewMux(mail), Retry: Policy}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	go func() {
		select {
		case <-srv.Ready(): // subscribed: the message will not wait for a consumer
		case <-ctx.Done():
			return
		}
		pub := &acemq.Publisher{Transport: conn, Mandatory: true}
		if _, err := pub.Publish(ctx, acemq.Outgoing{RoutingKey: Queue, Body: []byte(`{"user":"ada","text":"standup at ten"}`)}); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	if err := srv.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
