// Command custom-middleware stacks a service's own middleware with the
// library's: a middleware is a func(acemq.Handler) acemq.Handler, so a
// service writes one the way it writes an http middleware.
//
//	go run ./examples/custom-middleware
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/transport/memory"
)

type tenantKey struct{}

// RequireTenant dead-letters a message without an x-tenant header, before
// the handler runs, and hands the tenant to the handler through the context.
// A message is immutable; the context is how middleware passes things on.
func RequireTenant(next acemq.Handler) acemq.Handler {
	return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		tenant, _ := m.Header("x-tenant").(string)
		if tenant == "" {
			return ack.DeadLetter(errors.New("no x-tenant header"))
		}
		return next.ServeMessage(context.WithValue(ctx, tenantKey{}, tenant), m)
	})
}

// Audit is a middleware with settings, so it is a constructor: it writes one
// line per message with what the handler answered.
func Audit(w io.Writer) acemq.Middleware {
	return func(next acemq.Handler) acemq.Handler {
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			a := next.ServeMessage(ctx, m)
			fmt.Fprintf(w, "audit: %s attempt %d → %s\n", m.Body(), m.Attempt(), a)
			return a
		})
	}
}

func run(out io.Writer) error {
	broker := memory.New(memory.WithRealClock())
	defer broker.Close()
	conn := broker.Connect()
	defer conn.Close()

	mux := acemq.NewMux()
	// The first listed is the outermost: Audit sees every answer, including
	// Decode's park and RequireTenant's dead letter.
	mux.Use(Audit(out), middleware.Decode(codec.JSON), RequireTenant, middleware.MaxAge(time.Hour), middleware.Recover())
	mux.HandleFunc("invoices", func(ctx context.Context, m *acemq.Message) ack.Ack {
		fmt.Fprintf(out, "handler: invoice for tenant %s\n", ctx.Value(tenantKey{}))
		return ack.Accept()
	})
	srv := &acemq.Server{Transport: conn, Handler: mux, Concurrency: 1}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()

	pub := &acemq.Publisher{Transport: conn, Mandatory: true}
	for _, o := range []acemq.Outgoing{
		{RoutingKey: "invoices", Body: []byte(`{"n":1}`), Headers: map[string]any{"x-tenant": "acme"}},
		{RoutingKey: "invoices", Body: []byte(`{"n":2}`)},
		{RoutingKey: "invoices", Body: []byte(`n=3`), Headers: map[string]any{"x-tenant": "acme"}},
	} {
		for {
			if _, err := pub.Publish(context.Background(), o); err == nil {
				break
			} else if !errors.Is(err, acemq.ErrUnroutable) { // the server declares the queue as it starts
				return err
			}
			time.Sleep(time.Millisecond)
		}
	}
	for broker.Depth("invoices.dlq")+broker.Depth("invoices.parked") < 2 || broker.Unacked("invoices")+broker.Depth("invoices") > 0 {
		time.Sleep(time.Millisecond)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		return err
	}
	return <-done
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
