package transporttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
)

// Stallable is a transport on a broker the test can stall: Stall makes
// the broker take publishes and confirm none (a RabbitMQ node whose VM is
// stopped, as a node cut off from its cluster's majority confirms
// nothing; memory.Broker.Stall), Heal lets it go on.
type Stallable struct {
	Transport transport.Transport
	Stall     func()
	Heal      func()
}

// stallable is the harness's stallable transport. A harness without one
// skips the case, saying so, except under CI, where nothing may skip.
func (e *env) stallable() Stallable {
	e.t.Helper()
	if e.h.Stallable == nil {
		msg := "the harness cannot stall its broker (no Harness.Stallable)"
		if os.Getenv("CI") != "" {
			e.t.Fatal(msg)
		}
		e.t.Skip(msg)
	}
	s := e.h.Stallable(e.t)
	e.t.Cleanup(func() { _ = s.Transport.Close() })
	return s
}

// testStallHoldsBack: a broker that takes publishes and confirms none is
// seen (Check fails with ErrStalled while a publish waits), and while it
// lasts the transport refuses further publishes unsent, with ErrStalled,
// rather than adding messages whose outcome would be unknown. When the
// broker goes on, the publish that waited is confirmed, or its outcome is
// unknown and it reaches the queue all the same; a publish then is
// confirmed, Check passes, and the refused one never arrives.
func testStallHoldsBack(t *testing.T, e *env) {
	s := e.stallable()
	c := s.Transport
	q := e.queue(c, "stalled", nil)
	e.send(c, q, "before")

	s.Stall()
	healed := false
	t.Cleanup(func() {
		if !healed {
			s.Heal()
		}
	})
	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
		defer cancel()
		_, err := c.Publish(ctx, transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("waited")})
		waited <- err
	}()
	if !polltest.Until(wait, func() bool { return errors.Is(checkOf(c), transport.ErrStalled) }) {
		t.Fatalf("Check while a publish waits on a stalled broker: %v, want ErrStalled", checkOf(c))
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := c.Publish(ctx, transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("refused")})
	if !errors.Is(err, transport.ErrStalled) {
		t.Errorf("a publish while stalled: %v, want it refused unsent with ErrStalled", err)
	}

	s.Heal()
	healed = true
	select {
	case err := <-waited:
		if err != nil && !errors.Is(err, transport.ErrUnconfirmed) {
			t.Errorf("the publish that waited through the stall: %v, want confirmed or ErrUnconfirmed", err)
		}
	case <-time.After(2 * wait):
		t.Fatal("the publish that waited through the stall never returned")
	}
	// A publish now is confirmed (a probe, if the stall is still on
	// record), and Check passes after it.
	after := 0 // publishes of "after" that may have reached the queue
	if !polltest.Until(wait, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_, err := c.Publish(ctx, transport.Publishing{RoutingKey: q, Mandatory: true, Body: []byte("after")})
		if !errors.Is(err, transport.ErrStalled) {
			after++
		}
		return err == nil
	}) {
		t.Fatal("no publish confirmed after the broker went on")
	}
	if !polltest.Until(wait, func() bool { return checkOf(c) == nil }) {
		t.Errorf("Check after the broker went on: %v", checkOf(c))
	}
	sub := e.consume(c, q, 10)
	got := map[string]int{}
	for range 2 + after {
		d := e.recv(sub)
		got[string(d.Body)]++
		e.ack(d)
	}
	e.none(sub)
	if got["before"] != 1 || got["waited"] != 1 || got["refused"] != 0 || got["after"] != after {
		t.Errorf("the queue held %v; want before and waited once, refused never, after %d times", got, after)
	}
}

// checkOf is c's Check, or an error saying it has none.
func checkOf(c transport.Transport) error {
	ch, ok := c.(transport.Checker)
	if !ok {
		return fmt.Errorf("%T has no Check", c)
	}
	return ch.Check()
}
