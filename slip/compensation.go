package slip

import (
	"context"
	"fmt"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
)

// UndoFunc is a compensation's work: it undoes what its stop did, with
// the arguments the stop registered.
type UndoFunc func(ctx context.Context, m *acemq.Message, u *Undo) ack.Ack

// Compensation is the handler of a compensation queue. On its accept the
// slip goes on to the compensation before it (the one registered before),
// or, with none left, its faulted event goes; a send that fails is a
// retry. A compensation runs on its queue's own ladder; when the server
// gives up on it, its dead letter carries the slip's whole state and the
// faulted event says the slip is half-compensated (replay the dead letter
// to go on compensating).
func (c *Courier) Compensation(fn UndoFunc) acemq.Handler {
	return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
		doc, err := take(m, atCompensation)
		if err != nil {
			return ack.Park(err)
		}
		comp := doc.Compensations[len(doc.Compensations)-1]
		m.BeforeDeadLetter(func(ctx context.Context, reason string) (map[string]any, error) {
			return c.halfCompensated(ctx, parcelOf(m), doc, comp, reason)
		})
		a := fn(ctx, m, &Undo{doc: doc, comp: comp})
		if a.Outcome() != ack.OutcomeAccept {
			return a
		}
		next := doc.clone()
		next.Compensations = next.Compensations[:len(next.Compensations)-1]
		next.Compensated = append(next.Compensated, Compensated{Stop: comp.Stop, Queue: comp.Queue, At: c.now()})
		p := parcelOf(m)
		if len(next.Compensations) > 0 {
			err = c.hop(ctx, p, next, next.Compensations[len(next.Compensations)-1].Queue, fmt.Sprintf("%s.c%d", next.ID, len(next.Compensated)+1))
		} else {
			next.State = StateFaulted
			err = c.event(ctx, p, next, next.Faulted, StateFaulted)
		}
		if err != nil {
			return ack.Retry(err)
		}
		return a
	})
}

// atCompensation says why doc cannot be taken as a compensation at queue.
func atCompensation(doc *Document, queue string) error {
	switch {
	case doc.State != StateCompensating:
		return fmt.Errorf("acemq: slip %s is %s, not compensating, at compensation %s", doc.ID, doc.State, queue)
	case len(doc.Compensations) == 0:
		return fmt.Errorf("acemq: slip %s has no compensation left, yet it is at %s", doc.ID, queue)
	case doc.Compensations[len(doc.Compensations)-1].Queue != queue:
		return fmt.Errorf("acemq: slip %s is for compensation %s, not %s, where it was delivered", doc.ID, doc.Compensations[len(doc.Compensations)-1].Queue, queue)
	}
	return nil
}

// halfCompensated is what the server's giving up on a compensation does:
// the faulted event says the slip is half-compensated, and the dead letter
// keeps the whole slip, still compensating, for a replay to go on.
func (c *Courier) halfCompensated(ctx context.Context, p parcel, doc *Document, comp Compensation, reason string) (map[string]any, error) {
	h := doc.clone()
	if h.Fault == nil {
		h.Fault = &Fault{}
	}
	h.Fault.Compensation, h.Fault.CompensationReason = comp.Queue, reason
	ev := h.clone()
	ev.State = StateHalfCompensated
	if err := c.event(ctx, p, ev, ev.Faulted, StateHalfCompensated); err != nil {
		return nil, err
	}
	return headerOf(h)
}
