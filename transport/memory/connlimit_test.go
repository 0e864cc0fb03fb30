package memory_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
	"github.com/acemq/acemq/transport/transporttest"
)

// TestConnectionLimitConformance runs the suite's connection-limit case,
// which transport/amqp passes on RabbitMQ with set_vhost_limits and
// close_all_connections.
func TestConnectionLimitConformance(t *testing.T) {
	t.Parallel()
	b := memory.New()
	t.Cleanup(func() { _ = b.Close() })
	transporttest.ConnectionLimit(t, transporttest.Harness{
		New:     func(testing.TB) transport.Transport { return b.Connect() },
		Advance: func(_ testing.TB, d time.Duration) { b.Clock().Advance(d) },
	}, transporttest.ConnectionLimiter{
		Limit:    func(_ testing.TB, n int) { b.SetConnectionLimit(n) },
		CloseAll: func(testing.TB) { b.CloseConnections() },
	})
}

// TestConnectionLimitCounts: the limit counts the Conn and each connected
// subscription; a Consume at the limit is refused for now with RabbitMQ's
// words; a subscription closed at the limit waits, and the room a Close
// makes lets the first one waiting in, which is told nil, while the other
// stays refused.
func TestConnectionLimitCounts(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	var got [2][]error
	consume := func(i int) transport.Subscription {
		s, err := f.c.Consume(f.ctx, "q", transport.ConsumeOptions{OnRefused: func(err error) { got[i] = append(got[i], err) }})
		if err != nil {
			t.Fatalf("Consume %d: %v", i, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	first, second := consume(0), consume(1)
	f.b.SetConnectionLimit(3) // the Conn and both subscriptions: at the limit
	_, err := f.c.Consume(f.ctx, "q", transport.ConsumeOptions{})
	var re *transport.RefusedError
	if !errors.Is(err, transport.ErrRefused) || !errors.As(err, &re) || !strings.Contains(re.Reason, "connection limit (3) is reached") {
		t.Fatalf("Consume at the limit = %v, want a RefusedError with RabbitMQ's words", err)
	}

	f.b.SetConnectionLimit(1) // only the Conn fits
	f.b.CloseConnections()
	for i := range got {
		if len(got[i]) != 1 || !errors.Is(got[i][0], transport.ErrRefused) {
			t.Fatalf("subscription %d was told %v, want one refusal", i, got[i])
		}
	}
	f.send("q", "a")
	f.none(first)
	f.none(second)

	f.b.SetConnectionLimit(2) // room for one: the first closed
	if n := len(got[0]); n != 2 || got[0][1] != nil {
		t.Fatalf("the first subscription was told %v, want its refusal then nil", got[0])
	}
	if n := len(got[1]); n != 2 || !errors.Is(got[1][1], transport.ErrRefused) {
		t.Fatalf("the second subscription was told %v, want two refusals (each change of the limit is a try)", got[1])
	}
	var r2 *transport.RefusedError
	if errors.As(got[1][1], &r2); r2 == nil || r2.Tries != 2 {
		t.Fatalf("the second refusal = %v, want Tries 2", got[1][1])
	}
	f.ack(f.recv(first, "a"))

	if err := first.Close(); err != nil { // makes room for the second
		t.Fatal(err)
	}
	if n := len(got[1]); n != 3 || got[1][2] != nil {
		t.Fatalf("the second subscription was told %v, want nil once the first closed", got[1])
	}
	f.send("q", "b")
	f.ack(f.recv(second, "b"))
	if err := second.Err(); err != nil {
		t.Fatalf("Err = %v, want nil", err)
	}
}
