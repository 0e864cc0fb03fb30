package acemq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

type paymentSettled struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// TestPubSubBindings: three services' queues bound to one topic exchange
// through QueueConfig.Bindings each get their own copy of a typed event;
// a queue bound to another key gets none.
func TestPubSubBindings(t *testing.T) {
	t.Parallel()
	broker := memory.New()
	defer broker.Close()
	got := make(chan string, 10)
	handler := func(ctx context.Context, m *acemq.Message, e paymentSettled) ack.Ack {
		got <- fmt.Sprintf("%s %s %d %s", m.Queue(), e.ID, e.Amount, m.Envelope().ContentType)
		return ack.Accept()
	}
	events := []acemq.Binding{{Exchange: "payments.events", Keys: []string{"payment.settled"}}}
	queues := map[string]acemq.QueueConfig{
		"ledger.payments":  {Bindings: events},
		"mailer.payments":  {Bindings: []acemq.Binding{{Exchange: "payments.events", Keys: []string{"payment.*"}}}},
		"reports.payments": {Bindings: []acemq.Binding{{Exchange: "payments.events", Keys: []string{"#"}}}},
		"refunds.payments": {Bindings: []acemq.Binding{{Exchange: "payments.events", Keys: []string{"payment.refunded"}}}},
	}
	mux := acemq.NewMux()
	for q := range queues {
		mux.Handle(q, acemq.Decoded(codec.JSON, handler))
	}
	f := startOn(t, broker, &acemq.Server{Handler: mux, Queues: queues}, nil)
	<-f.srv.Ready()
	if x, ok := broker.Exchange("payments.events"); !ok || x.Kind != "topic" || !x.Durable {
		t.Fatalf("exchange declared as %+v, %v", x, ok)
	}
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
	if _, err := pub.PublishValue(context.Background(), acemq.Outgoing{Exchange: "payments.events", RoutingKey: "payment.settled"}, paymentSettled{ID: "p-1", Amount: 4200}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 3 {
		line := <-got
		if !strings.HasSuffix(line, " p-1 4200 application/json") {
			t.Errorf("delivered %q", line)
		}
		seen[strings.Fields(line)[0]] = true
	}
	for _, q := range []string{"ledger.payments", "mailer.payments", "reports.payments"} {
		if !seen[q] {
			t.Errorf("%s got no copy (saw %v)", q, seen)
		}
	}
	if n := broker.Depth("refunds.payments"); n != 0 {
		t.Errorf("refunds.payments got %d", n)
	}
}

func TestPubSubBindingsRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		b    acemq.Binding
		want string
	}{
		{acemq.Binding{Keys: []string{"x"}}, "no exchange named"},
		{acemq.Binding{Exchange: "events"}, "topic exchange events with no routing key"},
		{acemq.Binding{Exchange: "events", Kind: "x-consistent-hash", Keys: []string{"1"}}, `exchange events of kind "x-consistent-hash"`},
		{acemq.Binding{Exchange: "events", Keys: []string{strings.Repeat("k", 256)}}, "routing key of 256 bytes"},
	} {
		_, conn := bare(t)
		srv := &acemq.Server{Transport: conn, Handler: acceptMux("q"), Queues: map[string]acemq.QueueConfig{"q": {Bindings: []acemq.Binding{tt.b}}}}
		err := srv.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), `Server.Queues["q"].Bindings[0]: `+tt.want) {
			t.Errorf("%+v: Run = %v, want %q", tt.b, err, tt.want)
		}
	}
}

// TestPubSubFanoutAndAmq: a fanout binding needs no key; an amq.* exchange
// is bound to, not declared (the broker refuses that).
func TestPubSubFanoutAndAmq(t *testing.T) {
	t.Parallel()
	f := start(t, &acemq.Server{Queues: map[string]acemq.QueueConfig{
		"audit": {Bindings: []acemq.Binding{{Exchange: "everything", Kind: "fanout"}, {Exchange: "amq.topic", Keys: []string{"audit.#"}}}},
	}}, map[string]acemq.Handler{"audit": acceptMux("audit")})
	pub := &acemq.Publisher{Transport: f.conn, Mandatory: true}
	for _, o := range []acemq.Outgoing{{Exchange: "everything", RoutingKey: "anything"}, {Exchange: "amq.topic", RoutingKey: "audit.login"}} {
		if res, err := pub.Publish(context.Background(), o); err != nil || !res.Routed {
			t.Errorf("publish %+v: %+v, %v", o, res, err)
		}
	}
}

func TestPublishValueRefusesWhatItCannotEncode(t *testing.T) {
	t.Parallel()
	broker, conn := bare(t)
	if err := conn.Declare(context.Background(), acemq.Topology("q", retry.None(), nil)); err != nil {
		t.Fatal(err)
	}
	pub := &acemq.Publisher{Transport: conn}
	if _, err := pub.PublishValue(context.Background(), acemq.Outgoing{RoutingKey: "q"}, make(chan int)); err == nil || !strings.Contains(err.Error(), "encode chan int") {
		t.Errorf("PublishValue(chan) = %v", err)
	}
	if _, err := pub.PublishValue(context.Background(), acemq.Outgoing{RoutingKey: "q", Body: []byte("x")}, 1); err == nil {
		t.Error("PublishValue with a Body too: no error")
	}
	if n := broker.Depth("q"); n != 0 {
		t.Errorf("%d published after a refusal", n)
	}
}
