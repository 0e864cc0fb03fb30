// Command least-privilege runs a consumer whose RabbitMQ user may read and
// write but not configure: it declares nothing, retries in the process only,
// and dead-letters into queues an operator declared beforehand with
//
//	acemq topology --url "$ADMIN_URL" --queue payments --apply
//
// (or, as this example does for itself, the same declarations through
// acemq.Topology on an admin connection).
//
//	go run ./examples/least-privilege                      # memory transport
//	go run ./examples/least-privilege -admin URL -service URL
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
	"github.com/acemq/acemq/transport/memory"
)

const queue = "acemq.example.payments"

// policy holds every wait in the process (WithBrokerWaitThreshold(0)): a user who
// may not declare has no rungs to wait on.
var policy = retry.Fixed(3, 50*time.Millisecond).WithBrokerWaitThreshold(0)

func main() {
	admin := flag.String("admin", "", "URL of a user with configure permission (empty: memory transport)")
	service := flag.String("service", "", "URL of the service's least-privilege user")
	flag.Parse()
	if err := run(os.Stdout, *admin, *service); err != nil {
		fmt.Fprintln(os.Stderr, "least-privilege:", err)
		os.Exit(1)
	}
}

func run(out io.Writer, adminURL, serviceURL string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, svc, closeAll, err := connect(ctx, adminURL, serviceURL)
	if err != nil {
		return err
	}
	defer closeAll()

	// The operator's step: declare the topology once, with configure rights.
	if err := admin.Declare(ctx, acemq.Topology(queue, policy, nil)); err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	fmt.Fprintf(out, "operator declared %s, %s, %s (no rungs: every wait is in the process)\n",
		queue, acemq.DeadLetterQueue(queue), acemq.ParkedQueue(queue))
	for d, ok, err := svc.Get(ctx, acemq.DeadLetterQueue(queue)); ok || err != nil; d, ok, err = svc.Get(ctx, acemq.DeadLetterQueue(queue)) {
		if err != nil {
			return err
		}
		d.Ack() // leftovers of an earlier run
	}

	var calls atomic.Int32
	mux := acemq.NewMux()
	mux.HandleFunc(queue, func(ctx context.Context, m *acemq.Message) ack.Ack {
		calls.Add(1)
		fmt.Fprintf(out, "attempt %d: the bank is not answering\n", m.Attempt())
		return ack.Retry(errors.New("the bank is not answering"))
	})
	srv := &acemq.Server{Transport: svc, Handler: mux, Retry: policy, NoDeclare: true}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	pub := &acemq.Publisher{Transport: svc, Mandatory: true}
	if _, err := pub.Publish(ctx, acemq.Outgoing{RoutingKey: queue, Body: []byte(`{"amount":100}`)}); err != nil {
		return err
	}
	var dead transport.Delivery
	for {
		d, ok, err := svc.Get(ctx, acemq.DeadLetterQueue(queue))
		if err != nil {
			return err
		}
		if ok {
			dead = d
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	dead.Ack()
	fmt.Fprintf(out, "dead-lettered: %s\n", acemq.EnvelopeOf(dead).Error)
	if err := srv.Shutdown(ctx); err != nil {
		return err
	}
	return <-done
}

// connect returns the admin's and the service's transports: one memory
// broker for both, or two RabbitMQ users.
func connect(ctx context.Context, adminURL, serviceURL string) (admin, svc transport.Transport, closeAll func(), err error) {
	if adminURL == "" {
		b := memory.New(memory.WithRealClock())
		a, s := b.Connect(), b.Connect()
		return a, s, func() { a.Close(); s.Close(); b.Close() }, nil
	}
	at, err := rabbitmq.Dial(ctx, adminURL, rabbitmq.WithConnectionName("acemq-example-admin"))
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := rabbitmq.Dial(ctx, serviceURL, rabbitmq.WithConnectionName("acemq-example-payments"))
	if err != nil {
		at.Close()
		return nil, nil, nil, err
	}
	return at, st, func() { at.Close(); st.Close() }, nil
}
