package acemq_test

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/transport/memory"
)

// ExampleFromSlog runs a server that logs through a *slog.Logger. Without
// a Logger the server would write its warnings and errors to
// slog.Default() all the same.
func ExampleFromSlog() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // for the Output below
			}
			return a
		},
	}))
	broker := memory.New()
	defer broker.Close()
	conn := broker.Connect()
	defer conn.Close()

	mux := acemq.NewMux()
	mux.HandleFunc("orders", func(ctx context.Context, m *acemq.Message) ack.Ack {
		return ack.DeadLetter(errors.New("no such customer"))
	})
	srv := &acemq.Server{Transport: conn, Handler: mux, Logger: acemq.FromSlog(logger)}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	<-srv.Ready()

	pub := &acemq.Publisher{Transport: conn, Mandatory: true}
	pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "orders", ID: "order-7", Body: []byte(`{}`)})
	waitFor(func() bool { return broker.Depth("orders.dlq") == 1 && broker.Unacked("orders") == 0 })

	srv.Shutdown(context.Background())
	<-done
	// Output:
	// level=WARN msg="acemq: message given up on" queue=orders id=order-7 attempt=1 outcome=rejected to=orders.dlq reason="the handler rejected it: no such customer"
}
