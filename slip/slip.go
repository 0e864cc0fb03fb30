package slip

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Slip is a routing slip as the step at one stop sees it: what it may
// read, and what it adds for the stops after it. A step's changes are
// sent on only when it accepts.
type Slip struct {
	doc    *Document // as it arrived, changed by the step
	stop   string
	record json.RawMessage
	added  []Compensation
}

// ID is the slip's stable id, the same at every stop.
func (s *Slip) ID() string { return s.doc.ID }

// Name is what kind of slip it is, as its starter named it.
func (s *Slip) Name() string { return s.doc.Name }

// Stop is the stop the slip is at: the step's queue.
func (s *Slip) Stop() string { return s.stop }

// Next are the stops after this one, in order.
func (s *Slip) Next() []string { return slices.Clone(s.doc.Itinerary[1:]) }

// Visited are the stops done before this one, with what each recorded.
func (s *Slip) Visited() []Visit { return slices.Clone(s.doc.Visited) }

// Var decodes the variable name into v (as encoding/json does) and
// reports whether the slip has it.
func (s *Slip) Var(name string, v any) (bool, error) {
	raw, ok := s.doc.Variables[name]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("acemq: slip %s: variable %q: %w", s.doc.ID, name, err)
	}
	return true, nil
}

// SetVar sets the variable name to v, encoded as JSON, for the stops
// after this one.
func (s *Slip) SetVar(name string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("acemq: slip %s: variable %q: %w", s.doc.ID, name, err)
	}
	if s.doc.Variables == nil {
		s.doc.Variables = map[string]json.RawMessage{}
	}
	s.doc.Variables[name] = raw
	return nil
}

// Record keeps v, encoded as JSON, as what this stop did: it goes into
// the slip's visited stops, for the stops after it and for the events.
func (s *Slip) Record(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("acemq: slip %s: record of %s: %w", s.doc.ID, s.stop, err)
	}
	s.record = raw
	return nil
}

// Compensate registers the undo of this stop's work: if a later stop
// fails for good, a message with args (encoded as JSON) goes to queue,
// whose handler is a Courier.Compensation. Compensations run the last
// registered first. It counts only if the step accepts.
func (s *Slip) Compensate(queue string, args any) error {
	if queue == "" {
		return fmt.Errorf("acemq: slip %s: a compensation of %s needs a queue", s.doc.ID, s.stop)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("acemq: slip %s: compensation %s of %s: %w", s.doc.ID, queue, s.stop, err)
	}
	s.added = append(s.added, Compensation{Stop: s.stop, Queue: queue, Args: raw})
	return nil
}

// Undo is a compensation as its handler sees it.
type Undo struct {
	doc  *Document
	comp Compensation
}

// ID is the slip's id.
func (u *Undo) ID() string { return u.doc.ID }

// Stop is the stop whose work this undoes.
func (u *Undo) Stop() string { return u.comp.Stop }

// Args decodes what the stop registered with its compensation into v.
func (u *Undo) Args(v any) error {
	if len(u.comp.Args) == 0 {
		return nil
	}
	if err := json.Unmarshal(u.comp.Args, v); err != nil {
		return fmt.Errorf("acemq: slip %s: the arguments of compensation %s: %w", u.doc.ID, u.comp.Queue, err)
	}
	return nil
}

// Var decodes the slip's variable name into v and reports whether it has
// it.
func (u *Undo) Var(name string, v any) (bool, error) {
	return (&Slip{doc: u.doc}).Var(name, v)
}

// Fault is why the slip is compensated.
func (u *Undo) Fault() Fault {
	if u.doc.Fault == nil {
		return Fault{}
	}
	return *u.doc.Fault
}
