package slip

import (
	"context"
	"errors"
	"fmt"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// StepFunc is a stop's work: it reads the slip, may add variables, a
// record and a compensation, and answers as any handler does.
type StepFunc func(ctx context.Context, m *acemq.Message, s *Slip) ack.Ack

// Step is the handler of a stop. On the step's accept it sends the slip
// on (or, after the last stop, its completed event) and only then accepts;
// a send that fails (the next stop reaches no queue, the broker refuses)
// is a retry instead, naming why, and a slip grown past MaxSize fails for
// good. Any other answer is the step's. When the server gives up on the
// step, the compensations registered by the stops before it begin before
// its dead letter is published (see the package doc).
func (c *Courier) Step(fn StepFunc) acemq.Handler {
	return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		doc, err := take(m, atStop)
		if err != nil {
			return ack.Park(err)
		}
		stop := m.Queue()
		s := &Slip{doc: doc.clone(), stop: stop}
		var done []Compensation // what the step registered, once it accepted
		m.BeforeDeadLetter(func(ctx context.Context, reason string) (map[string]any, error) {
			// A step that did its work and accepted, whose slip could not be
			// sent on (the next stop missing every attempt), is undone too.
			at := doc
			if len(done) > 0 {
				at = doc.clone()
				at.Compensations = append(at.Compensations, done...)
			}
			return c.fault(ctx, parcelOf(m), at, stop, reason)
		})
		a := fn(ctx, m, s)
		if a.Outcome() != ack.OutcomeAccept {
			return a
		}
		done = s.added
		if err := c.forward(ctx, parcelOf(m), s); err != nil {
			if errors.Is(err, errTooLarge) {
				return ack.Retry(ack.Fatal(err))
			}
			return ack.Retry(err)
		}
		return a
	})
}

// take reads the slip of m and checks with at that it may be taken at
// m's queue: an error is why the handler parks it.
func take(m *acemq.Message, at func(doc *Document, queue string) error) (*Document, error) {
	doc, err := ReadMessage(m)
	if err != nil {
		return nil, err
	}
	return doc, at(doc, m.Queue())
}

// atStop says why doc cannot be taken as a slip at stop, nil when it can.
func atStop(doc *Document, stop string) error {
	switch {
	case doc.State == StateCompensating:
		return fmt.Errorf("acemq: slip %s was compensated after %s failed for good; the slip is over, so %s does not run again: start a new slip", doc.ID, faultStop(doc), stop)
	case doc.State != StateRunning:
		return fmt.Errorf("acemq: slip %s is %s, not running, at stop %s", doc.ID, doc.State, stop)
	case len(doc.Itinerary) == 0:
		return fmt.Errorf("acemq: slip %s has no stops left, yet it is at %s", doc.ID, stop)
	case doc.Itinerary[0] != stop:
		return fmt.Errorf("acemq: slip %s is for stop %s, not %s, where it was delivered", doc.ID, doc.Itinerary[0], stop)
	}
	return nil
}

func faultStop(doc *Document) string {
	if doc.Fault == nil {
		return "a stop"
	}
	return doc.Fault.Stop
}

// forward sends the slip s on from its stop: to the next stop, or, after
// the last, its completed event.
func (c *Courier) forward(ctx context.Context, p parcel, s *Slip) error {
	next := s.doc
	next.Visited = append(next.Visited, Visit{Stop: s.stop, At: c.now(), Record: s.record})
	next.Itinerary = next.Itinerary[1:]
	next.Compensations = append(next.Compensations, s.added...)
	next.Fault = nil // a replayed stop that faulted with nothing to undo recovered
	if _, err := next.encodeWithin(MaxSize); err != nil {
		return fmt.Errorf("%w: %w", errTooLarge, err)
	}
	if len(next.Itinerary) == 0 {
		next.State = StateCompleted
		return c.event(ctx, p, next, next.Completed, StateCompleted)
	}
	return c.hop(ctx, p, next, next.Itinerary[0], fmt.Sprintf("%s.%d", next.ID, len(next.Visited)))
}

// errTooLarge marks a slip grown past MaxSize.
var errTooLarge = errors.New("acemq: slip too large")

// fault begins the compensation of the slip doc, which failed for good at
// stop for reason, and returns the dead letter's slip: with nothing to
// undo, the faulted event goes, and the dead letter keeps the slip
// running at its stop (a replay runs it again); otherwise the slip goes
// to the last compensation, and the dead letter says so.
func (c *Courier) fault(ctx context.Context, p parcel, doc *Document, stop, reason string) (map[string]any, error) {
	f := doc.clone()
	f.Fault = &Fault{Stop: stop, Reason: reason, At: c.now()}
	if len(f.Compensations) == 0 {
		ev := f.clone()
		ev.State = StateFaulted
		if err := c.event(ctx, p, ev, ev.Faulted, StateFaulted); err != nil {
			return nil, err
		}
		return headerOf(f)
	}
	f.State, f.Itinerary = StateCompensating, []string{}
	last := f.Compensations[len(f.Compensations)-1]
	if err := c.hop(ctx, p, f, last.Queue, fmt.Sprintf("%s.c%d", f.ID, len(f.Compensated)+1)); err != nil {
		return nil, err
	}
	return headerOf(f)
}

// headerOf is doc as the headers of a dead letter.
func headerOf(doc *Document) (map[string]any, error) {
	v, err := doc.encode()
	if err != nil {
		return nil, err
	}
	return map[string]any{Header: v}, nil
}
