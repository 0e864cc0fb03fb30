package acemqtest

import (
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
)

// Queued is a message waiting in a queue, as Broker.Peek shows it, with
// its envelope read the way the server and an operator read it.
type Queued struct {
	transport.Delivery
	Envelope acemq.Envelope
}

// Reason is the message's x-acemq-error: why it was dead-lettered or
// parked ("exhausted 5 attempts: ...", "could not be decoded: ..."),
// empty on a message nobody gave up on.
func (q Queued) Reason() string { return q.Envelope.Error }

// Queue returns the ready messages of the queue called name, oldest
// first, without taking them; none when it does not exist. It looks at
// the broker as it is: run the clock first (RunUntilIdle, Await) to look
// at where messages ended.
func (s *Server) Queue(name string) []Queued {
	ds := s.Broker.Peek(name)
	out := make([]Queued, len(ds))
	for i, d := range ds {
		out[i] = Queued{Delivery: d, Envelope: acemq.EnvelopeOf(d)}
	}
	return out
}

// DeadLetters returns what is in queue's dead-letter queue (queue.dlq):
// the messages given up on, each with its reason.
func (s *Server) DeadLetters(queue string) []Queued { return s.Queue(acemq.DeadLetterQueue(queue)) }

// Parked returns what is in queue's parked queue (queue.parked): the
// messages that could not be read, each with its reason.
func (s *Server) Parked(queue string) []Queued { return s.Queue(acemq.ParkedQueue(queue)) }

// Await runs the server, as RunUntilIdle does but stopping as soon as the
// server is quiet with at least n ready messages in the queue called
// name, and returns them. It fails the test when the server goes idle
// first: with no timer pending, nothing more can arrive. It suits a queue
// nobody consumes (a .dlq, a .parked, a rung, a queue a handler publishes
// to), where a message stays once it arrives.
func (s *Server) Await(tb testing.TB, name string, n int) []Queued {
	tb.Helper()
	c := s.Broker.Clock()
	for range maxSteps {
		s.quiet(tb)
		if got := s.Queue(name); len(got) >= n {
			return got
		}
		next, ok := c.Next()
		if !ok {
			tb.Fatalf("acemqtest: Await: %s holds %d of the %d messages awaited, and nothing is pending: no more will arrive",
				name, s.Broker.Depth(name), n)
		}
		c.Advance(max(next.Sub(c.Now()), 0))
	}
	tb.Fatalf("acemqtest: Await: %s holds %d of the %d messages awaited after %d steps of the clock", name, s.Broker.Depth(name), n, maxSteps)
	return nil
}
