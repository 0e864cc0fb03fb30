package acemqtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/serverhook"
)

// maxSteps bounds RunUntilIdle and Await: a clock that still has a timer
// after this many is being re-armed for ever (an at-least-once dead letter
// caught in a cycle is offered again every three minutes), and only a
// test that steps it with Advance can say when to stop.
const maxSteps = 100_000

// RunUntilIdle runs the server until nothing is pending, and returns how
// far the virtual clock moved. It waits until the server is quiet, moves
// the clock to the next timer, and again, until the server is quiet and
// no timer is left: every wait of a retry ladder is spent, whatever its
// jitter, and every message has arrived where it ends (handled and acked,
// in a .dlq, a .parked, or a queue nobody consumes). See the package
// documentation for what quiet and pending mean, and what they leave out.
func (s *Server) RunUntilIdle(tb testing.TB) time.Duration {
	tb.Helper()
	c := s.Broker.Clock()
	start := c.Now()
	for range maxSteps {
		s.quiet(tb)
		next, ok := c.Next()
		if !ok {
			return c.Now().Sub(start)
		}
		c.Advance(max(next.Sub(c.Now()), 0))
	}
	tb.Fatalf("acemqtest: RunUntilIdle: the clock still has timers after %d steps (%v of virtual time): something waits again for ever; step it with Advance",
		maxSteps, c.Now().Sub(start))
	return 0
}

// Advance moves the virtual clock forward by d as if that time had passed
// with the server running: timer by timer, in deadline order, the server
// quiet before each, so that a wait that begins on the way and falls due
// within d fires too. It returns with the clock d later and the server
// quiet. Advance(tb, 0) moves nothing: it waits for the server to handle
// what it has been given.
func (s *Server) Advance(tb testing.TB, d time.Duration) {
	tb.Helper()
	c := s.Broker.Clock()
	target := c.Now().Add(d)
	for {
		s.quiet(tb)
		next, ok := c.Next()
		if !ok || next.After(target) {
			break
		}
		c.Advance(max(next.Sub(c.Now()), 0))
	}
	c.Advance(max(target.Sub(c.Now()), 0))
	s.quiet(tb)
}

// quiet waits, in real time and within wait, until the server is quiet:
// ready (every queue consumed), and every message delivered to it and not
// settled asleep on the virtual clock. The broker tells no one when a
// delivery is settled, so quiet asks it, at most every millisecond: the
// one poll of this package.
func (s *Server) quiet(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(wait)
	pause := 20 * time.Microsecond
	t := time.NewTimer(pause)
	defer t.Stop()
	for {
		busy := s.busy()
		if busy == "" {
			return
		}
		s.stopped(tb)
		if time.Now().After(deadline) {
			tb.Fatalf("acemqtest: the server is not quiet after %v: %s", wait, busy)
		}
		t.Reset(pause)
		select {
		case <-t.C:
		case <-s.done:
		}
		pause = min(2*pause, time.Millisecond)
	}
}

// busy says what keeps the server from being quiet, or "" when it is.
func (s *Server) busy() string {
	open, cooling := 0, 0
	for _, b := range s.Server.Breakers() {
		if b.State == "open" {
			open++
		}
		switch {
		case b.CoolingDown:
			cooling++
		case b.Switching:
			return "queue " + b.Queue + ": its consumer is being cancelled or consumed again for its breaker"
		}
	}
	// A server whose every queue's breaker is open is not ready, and quiet:
	// it waits on the clock for the cool-down. So is one whose queue,
	// deleted under it and declared again, waits for handlers still
	// running on its old subscription while something waits on the clock:
	// they may be asleep on it (the engine says any other trouble first).
	err := s.Server.CheckReady()
	if _, pending := s.Broker.Clock().Next(); err != nil && pending && errors.Is(err, engine.ErrAwaitingHandlers) {
		err = nil
	}
	if err != nil && (open == 0 || open < len(s.queues())) {
		return err.Error()
	}
	// Deliveries prefetched beyond workers that all have one in hand, and
	// those waiting for a throttle's slot, wait without the clock.
	held, orphaned, ok := 0, 0, true
	e := serverhook.Engine(s.Server)
	var moves uint64
	if e != nil {
		moves = e.Moves()
		held, ok = e.Waiting()
		orphaned = e.Orphaned() // a deleted queue's, which the broker counts no more
	}
	if !ok {
		return "a delivery prefetched while a worker is free to take it"
	}
	unacked := 0
	for _, q := range s.queues() {
		unacked += s.Broker.Unacked(q)
	}
	// Each message a server holds in the process waiting on the clock is
	// one unsettled delivery and one After, and so is a handler asleep on
	// the clock, or a delivery waiting for a throttle's token, and a
	// delivery waiting for either holds the ones prefetched behind it
	// (held); any other
	// unsettled delivery is being worked on. A breaker waiting out its
	// cool-down is one After more.
	asleep := s.Broker.Clock().Pending() - cooling
	if e != nil && e.Moves() != moves {
		return "the server's workers moved while it was looked at"
	}
	if unacked-held+orphaned != asleep {
		return fmt.Sprintf("%d messages delivered and not settled (%d of them waiting for a throttle without the clock), %d asleep on the virtual clock", unacked, held, asleep)
	}
	return ""
}

// queues returns the queues the server consumes.
func (s *Server) queues() []string {
	if q, ok := s.Server.Handler.(interface{ Queues() []string }); ok {
		return q.Queues()
	}
	return nil
}
