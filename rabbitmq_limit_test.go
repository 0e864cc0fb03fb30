package acemq_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/retry"
)

// TestRabbitDeliveryLimit: on RabbitMQ 3.10 the server declares the quorum
// queue with its limit and route (read back with rabbitmqctl), and a
// message given back more often than the limit lands in .dlq with the
// broker's x-death, not dropped.
func TestRabbitDeliveryLimit(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	vhost := brokertest.Env(t, "ACEMQ_AMQP_VHOST")
	q := r.queue()
	t.Cleanup(func() {
		for _, n := range []string{q, q + ".dlq", q + ".parked"} {
			_, _ = r.admin.QueueDelete(n, false, false, false)
		}
	})
	r.serve(r.tr, q, &acemq.Server{Retry: retry.Fixed(3, 0), Queues: map[string]acemq.QueueConfig{
		q: {DeliveryLimit: 2, Args: map[string]any{"x-queue-type": "quorum"}},
	}}, always(ack.Requeue()))

	cmd := exec.Command("rabbitmqctl", "-q", "list_queues", "-p", vhost, "name", "arguments")
	cmd.Env = append(os.Environ(), "RABBITMQ_NODENAME=rabbit@localhost")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl: %v\n%s", err, out)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, q+"\t") {
			line = l
		}
	}
	for _, want := range []string{`{"x-delivery-limit",2}`, `{"x-dead-letter-exchange","acemq.dlx"}`,
		`{"x-dead-letter-routing-key","` + q + `"}`, `{"x-dead-letter-strategy","at-least-once"}`,
		`{"x-overflow","reject-publish"}`, `{"x-queue-type","quorum"}`} {
		if !strings.Contains(line, want) {
			t.Errorf("rabbitmqctl shows %s as %q; want %s in it", q, line, want)
		}
	}

	r.publish(q, "{}")
	d := r.take(q + ".dlq")
	deaths, _ := d.Headers["x-death"].([]any)
	if len(deaths) == 0 {
		t.Fatalf("dead letter without x-death: %v", d.Headers)
	}
	if e, _ := deaths[0].(map[string]any); e["reason"] != "delivery_limit" || e["queue"] != q {
		t.Errorf("x-death %v", deaths[0])
	}
	if reason := acemq.EnvelopeOf(d).Error; !strings.Contains(reason, "delivery limit") || !strings.Contains(reason, "from queue "+q) {
		t.Errorf("the dead letter reads back with reason %q, want the broker's delivery limit named", reason)
	}
}

// TestRabbitDeliveryLimitChecks: on RabbitMQ too, half a declaration is
// refused before anything is declared, and a limit below the attempts
// stops a strict server.
func TestRabbitDeliveryLimitChecks(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	mux := acemq.NewMux()
	mux.Handle(q, always(ack.Accept()))
	for _, tt := range []struct {
		c    acemq.QueueConfig
		want string
	}{
		{acemq.QueueConfig{Args: map[string]any{"x-queue-type": "quorum", "x-delivery-limit": 3}}, "with no x-dead-letter-exchange"},
		{acemq.QueueConfig{DeliveryLimit: 2, StrictDeliveryLimit: true, Args: map[string]any{"x-queue-type": "quorum"}}, "delivery limit of 2, below the 4 attempts"},
	} {
		srv := &acemq.Server{Transport: r.tr, Handler: mux, Retry: retry.Fixed(4, 0), Queues: map[string]acemq.QueueConfig{q: tt.c}}
		if err := srv.Run(t.Context()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Run = %v, want %q", err, tt.want)
		}
	}
	if _, err := r.tr.Inspect(t.Context(), q); err == nil {
		t.Errorf("%s was declared by a refused start", q)
	}
}

// TestRabbitDeliveryLimitWarns: below the attempts and not strict, the
// server starts on RabbitMQ and says so once, naming the queue.
func TestRabbitDeliveryLimitWarns(t *testing.T) {
	t.Parallel()
	r := newRabbit(t)
	q := r.queue()
	t.Cleanup(func() {
		for _, n := range []string{q, q + ".dlq", q + ".parked"} {
			_, _ = r.admin.QueueDelete(n, false, false, false)
		}
	})
	core, logs := observer.New(zap.WarnLevel)
	mux := acemq.NewMux()
	mux.Handle(q, always(ack.Accept()))
	srv := &acemq.Server{Transport: r.tr, Handler: mux, Retry: retry.Fixed(4, 0), Logger: zap.New(core),
		Queues: map[string]acemq.QueueConfig{q: {DeliveryLimit: 2, Args: map[string]any{"x-queue-type": "quorum"}}}}
	done := make(chan error, 1)
	go func() { done <- srv.Run(t.Context()) }()
	select {
	case <-srv.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	if n := logs.FilterMessageSnippet("queue " + q + " is declared with a delivery limit of 2, below the 4 attempts").Len(); n != 1 {
		t.Errorf("%d warnings, want 1: %v", n, logs.All())
	}
	if err := srv.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-done
}
