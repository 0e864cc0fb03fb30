package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/zap/zaptest"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/polltest"
)

// TestRabbitMQStatusBreakerMarker: on RabbitMQ, a breaker marker declared
// as the wire contract says (exclusive, on a connection of its own, with
// the breaker's state in its arguments) shows on its queue's service in
// acemq status, from the management API's listing, with its since, until
// and why; once the connection that declared it closes, the broker deletes
// it and status no longer shows it. A second marker, for a queue the vhost
// does not have, gives that queue a service of its own.
func TestRabbitMQStatusBreakerMarker(t *testing.T) {
	t.Parallel()
	u := rabbitVhost(t)
	q := rabbitQueue()
	if code, out, errOut := cli(t, dialRabbitMQ, "topology", "--url", u, "--queue", q, "--apply"); code != 0 {
		t.Fatalf("topology: %d\n%s%s", code, out, errOut)
	}
	conn, ch := rawChannel(t, u)
	// Milliseconds, as the contract's int64 arguments hold them.
	since := time.Now().Add(-3 * time.Minute).Truncate(time.Millisecond).UTC()
	until := since.Add(5 * time.Minute)
	const why = "12 of the last 20 counted failures; the last: POST /reserve: HTTP 503 <b>"
	declare := func(queue, instance string) string {
		name := queue + ".breaker." + instance
		_, err := ch.QueueDeclare(name, false, false, true, false, amqp.Table{
			argBreakerQueue: queue, argBreakerState: breakerOpen, argBreakerSince: since.UnixMilli(), argBreakerUntil: until.UnixMilli(),
			argBreakerWhy: why, argBreakerInstance: instance, "x-max-length": int32(0), "x-overflow": "reject-publish", "x-queue-type": "classic",
		})
		if err != nil {
			t.Fatalf("declare the marker %s: %v", name, err)
		}
		return name
	}
	marker := declare(q, "test-1-4242-ab12")
	lone := q + "-gone"
	declare(lone, "test-2-4243-cd34")

	var got statusOut
	var out string
	status := func() {
		t.Helper()
		code, stdout, errOut := cli(t, dialRabbitMQ, "status", "--url", u, "--json")
		out, got = stdout, statusOut{}
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
			t.Fatalf("status: %d %v\n%s%s", code, err, out, errOut)
		}
	}
	// The API lists a queue as soon as it is declared, with its
	// arguments; poll all the same (a loaded broker is slow to answer).
	if !polltest.UntilEvery(60*time.Second, 500*time.Millisecond, func() bool {
		status()
		return len(got.Services) == 2 && len(got.Services[0].Breakers) == 1 && len(got.Services[1].Breakers) == 1
	}) {
		t.Fatalf("status never showed the two breakers:\n%s", out)
	}
	s := got.Services[0]
	if s.Queue != q {
		s = got.Services[1]
	}
	b := s.Breakers[0]
	if s.Queue != q || b.Instance != "test-1-4242-ab12" || b.State != breakerOpen || b.Marker != marker || b.Why != why || b.Note != "" ||
		b.Since == nil || !b.Since.Equal(since) || b.Until == nil || !b.Until.Equal(until) {
		t.Errorf("the breaker on %s: %+v\n%s", q, b, out)
	}
	if len(s.Queues) != 3 || s.Queues[0].Name != q || s.Queues[0].Missing || got.Other != nil {
		t.Errorf("the markers are not rows, nor other queues:\n%s", out)
	}
	for _, o := range got.Services {
		if o.Queue == lone && (len(o.Queues) != 3 || !o.Queues[0].Missing || o.Breakers[0].Instance != "test-2-4243-cd34") {
			t.Errorf("%s: %+v", lone, o)
		}
	}
	if !strings.Contains(out, `"since": "`+since.Format(time.RFC3339Nano)+`"`) {
		t.Errorf("since not in RFC 3339:\n%s", out)
	}
	code, text, errOut := cli(t, dialRabbitMQ, "status", "--url", u)
	if code != 0 || !strings.Contains(text, "2 circuit breakers not closed\n") ||
		!strings.Contains(text, "\n  breaker test-1-4242-ab12 ") || !strings.Contains(text, " open since ") || !strings.Contains(text, since.Format("15:04:05Z")+" (") ||
		!strings.Contains(text, ", probes at "+until.Format("15:04:05Z")+" (in ") || !strings.Contains(text, why+"\n") {
		t.Errorf("status: %d\n%s%s", code, text, errOut)
	}
	t.Logf("acemq status:\n%s", text)

	// The connection closed, the broker deletes its exclusive queues.
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if !polltest.UntilEvery(60*time.Second, 500*time.Millisecond, func() bool {
		status()
		return len(got.Services) == 1 && got.Services[0].Queue == q && got.Services[0].Breakers == nil
	}) {
		t.Fatalf("status still shows a breaker after the marker's connection closed:\n%s", out)
	}
	if strings.Contains(out, `"breakers"`) {
		t.Errorf("%s", out)
	}
}

// TestRabbitMQStatusBreakerFromServer: the marker as the library's own
// server keeps it (not one the test declares): a server whose queue's
// breaker is tripped shows on that queue's service in acemq status, with
// the why it was tripped with and the server's instance; once the server
// has stopped, status no longer shows it.
func TestRabbitMQStatusBreakerFromServer(t *testing.T) {
	t.Parallel()
	u := rabbitVhost(t)
	q := rabbitQueue()
	mux := acemq.NewMux()
	mux.Handle(q, acemq.HandlerFunc(func(context.Context, *acemq.Message) ack.Ack { return ack.Accept() }))
	srv := &acemq.Server{Transport: rabbitTransport(t, u), Handler: mux, Logger: zaptest.NewLogger(t),
		Queues: map[string]acemq.QueueConfig{q: {Breaker: &acemq.Breaker{CoolDown: time.Hour}}}}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	select {
	case <-srv.Ready():
	case err := <-done:
		stopped = true
		t.Fatalf("Run: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the server was not ready in 60s")
	}
	const why = "the warehouse is down for maintenance"
	if err := srv.TripBreaker(q, why); err != nil {
		t.Fatal(err)
	}
	var got statusOut
	var out string
	status := func() []breakerMark {
		t.Helper()
		code, stdout, errOut := cli(t, dialRabbitMQ, "status", "--url", u, "--json", "--queue", q)
		out, got = stdout, statusOut{}
		if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Services) != 1 || got.Services[0].Queue != q {
			t.Fatalf("status: %d %v\n%s%s", code, err, out, errOut)
		}
		return got.Services[0].Breakers
	}
	if !polltest.UntilEvery(60*time.Second, 500*time.Millisecond, func() bool { return len(status()) == 1 }) {
		t.Fatalf("status never showed the tripped breaker:\n%s", out)
	}
	b := got.Services[0].Breakers[0]
	if b.State != breakerOpen || b.Why != why || b.Instance == "" || b.Marker != q+".breaker."+b.Instance || b.Note != "" ||
		b.Since == nil || b.Until == nil || !b.Until.Equal(b.Since.Add(time.Hour)) {
		t.Errorf("the breaker: %+v\n%s", b, out)
	}
	stop()
	if !polltest.UntilEvery(60*time.Second, 500*time.Millisecond, func() bool { return len(status()) == 0 }) {
		t.Fatalf("status still shows the breaker after the server stopped:\n%s", out)
	}
}
