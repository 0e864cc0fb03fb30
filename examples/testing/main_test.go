package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/transport/memory"
)

// scriptedMailer fails the first failures sends, then records.
type scriptedMailer struct {
	mu       sync.Mutex
	failures int
	err      error
	sent     []string
	calls    int
}

func (s *scriptedMailer) Send(_ context.Context, to, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= s.failures {
		return s.err
	}
	s.sent = append(s.sent, to)
	return nil
}

func (s *scriptedMailer) sentCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

func (s *scriptedMailer) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// harness runs the service's mux on a memory broker with a virtual clock.
type harness struct {
	t      *testing.T
	broker *memory.Broker
	conn   *memory.Conn
}

func startService(t *testing.T, mail Mailer) *harness {
	t.Helper()
	h := &harness{t: t, broker: memory.New()}
	h.conn = h.broker.Connect()
	srv := &acemq.Server{Transport: h.conn, Handler: NewMux(mail), Retry: Policy}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		h.conn.Close()
		h.broker.Close()
	})
	h.eventually("subscribed", func() bool {
		info, err := h.conn.Inspect(context.Background(), Queue)
		return err == nil && info.Consumers == 1
	})
	return h
}

func (h *harness) publish(body string) {
	h.t.Helper()
	pub := &acemq.Publisher{Transport: h.conn, Mandatory: true}
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: Queue, Body: []byte(body)}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// TestTheLadderInMilliseconds walks the whole five-minute ladder: two waits
// in the process, two on rungs, all by moving the virtual clock.
func TestTheLadderInMilliseconds(t *testing.T) {
	mail := &scriptedMailer{failures: 4, err: errors.New("smtp: 421")}
	h := startService(t, mail)
	h.publish(`{"user":"ada","text":"standup at ten"}`)
	clock := h.broker.Clock()
	for i, step := range Policy.Schedule() {
		wait := step.Delay
		h.eventually("attempt", func() bool { return mail.callCount() == i+1 })
		if rung := retry.RungName(Queue, wait); wait >= Policy.Threshold() {
			h.eventually("the copy on "+rung, func() bool { return h.broker.Depth(rung) == 1 })
		} else {
			clock.BlockUntil(context.Background(), 1) // the server sleeps on the clock
		}
		clock.Advance(wait)
	}
	h.eventually("sent on the fifth attempt", func() bool { return mail.sentCount() == 1 })
	if h.broker.Depth(Queue+".dlq") != 0 {
		t.Error("a reminder that was sent was dead-lettered")
	}
}

func TestNoSuchUserIsDeadLetteredAtOnce(t *testing.T) {
	mail := &scriptedMailer{failures: 1, err: ErrNoSuchUser}
	h := startService(t, mail)
	h.publish(`{"user":"nobody","text":"hi"}`)
	h.eventually("dead-lettered", func() bool { return h.broker.Depth(Queue+".dlq") == 1 })
	dead := h.broker.Peek(Queue + ".dlq")[0]
	if got := acemq.EnvelopeOf(dead).Error; got != "the handler rejected it: no such user" {
		t.Errorf("reason %q", got)
	}
}

func TestNotJSONIsParked(t *testing.T) {
	h := startService(t, &scriptedMailer{})
	h.publish(`reminder: standup`)
	h.eventually("parked", func() bool { return h.broker.Depth(Queue+".parked") == 1 })
}
