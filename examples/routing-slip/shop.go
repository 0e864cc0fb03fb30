package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/slip"
)

// The stops of an order's fulfilment, the compensations that undo the
// first two, and the queue that receives every slip's completed or
// faulted event.
const (
	Reserve = "stock.reserve"
	Charge  = "card.charge"
	Ship    = "shipping.ship"
	Release = "stock.release"
	Refund  = "card.refund"
	Events  = "orders.slips"
)

// Stops is the itinerary every order's slip is started with.
var Stops = []string{Reserve, Charge, Ship}

// Order is the slip's payload: the same body at every stop.
type Order struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Cents    int64  `json:"cents"`
	Card     string `json:"card"`
	Address  string `json:"address"`
}

// FlakyCard is a test card the payment provider times out on the first
// time it is charged; the retry charges it.
const FlakyCard = "4000 0000 0000 0119"

// Served is where the couriers deliver; any other address fails for good
// at shipping.
var Served = map[string]bool{"London": true, "Paris": true}

// ErrNoCourier is why an order to an address no courier serves cannot
// ship: nothing a retry would change, so it is fatal.
var ErrNoCourier = errors.New("no courier serves the address")

// Shop is the pretend back end the stops call (the warehouse, the payment
// provider, the couriers) and a journal of what each did, per slip. The
// stops of one slip run one after another, so each slip's journal is in
// a fixed order whatever the concurrency.
type Shop struct {
	mu       sync.Mutex
	journal  map[string][]string // by slip id
	charges  map[string]int      // calls to the payment provider, by card
	held     map[string]bool     // reservations not released
	kept     map[string]bool     // payments not refunded
	dups     []string            // hop ids delivered again, in order
	dupFound chan string         // each duplicate's hop id
}

// NewShop returns an empty shop.
func NewShop() *Shop {
	return &Shop{journal: map[string][]string{}, charges: map[string]int{}, held: map[string]bool{},
		kept: map[string]bool{}, dupFound: make(chan string, 16)}
}

func (sh *Shop) note(id, format string, args ...any) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.journal[id] = append(sh.journal[id], fmt.Sprintf(format, args...))
}

// Mux serves the three stops and the two compensations, each wrapped in
// the idempotency middleware: a hop's x-acemq-id is derived from the
// slip's id (<id>.0, <id>.1, ... and <id>.c1, ...), so a hop delivered
// twice is recognised and its step runs once.
func (sh *Shop) Mux(c *slip.Courier, store idempotency.Store) *acemq.Mux {
	mux := acemq.NewMux()
	mux.Use(middleware.Idempotent(store, middleware.WithDuplicateHook(sh.duplicate)))
	mux.Handle(Reserve, c.Step(sh.reserve))
	mux.Handle(Charge, c.Step(sh.charge))
	mux.Handle(Ship, c.Step(sh.ship))
	mux.Handle(Release, c.Compensation(sh.release))
	mux.Handle(Refund, c.Compensation(sh.refund))
	return mux
}

// duplicate is told of each hop the idempotency middleware accepted
// without running its step.
func (sh *Shop) duplicate(_ context.Context, m *acemq.Message) {
	id := m.ID()
	if doc, err := slip.Read(map[string]any{slip.Header: m.Header(slip.Header)}); err == nil {
		id = doc.ID
	}
	sh.note(id, "%-14s hop %s delivered again: a duplicate, not run", m.Queue(), m.ID())
	sh.mu.Lock()
	sh.dups = append(sh.dups, m.ID())
	sh.mu.Unlock()
	sh.dupFound <- m.ID()
}

// order decodes the slip's payload; a body that is not an order is parked.
func order(m *acemq.Message) (Order, *ack.Ack) {
	var o Order
	if err := json.Unmarshal(m.Body(), &o); err != nil {
		a := ack.Park(fmt.Errorf("not an order: %w", err))
		return o, &a
	}
	return o, nil
}

// reserve holds the item and passes the reservation on in a variable; its
// compensation releases it.
func (sh *Shop) reserve(_ context.Context, m *acemq.Message, s *slip.Slip) ack.Ack {
	o, bad := order(m)
	if bad != nil {
		return *bad
	}
	r := "rsv-" + s.ID()
	if err := errors.Join(s.SetVar("reservation", r),
		s.Record(map[string]string{"reservation": r, "item": o.Item}),
		s.Compensate(Release, map[string]string{"reservation": r})); err != nil {
		return ack.Retry(ack.Fatal(err))
	}
	sh.mu.Lock()
	sh.held[r] = true
	sh.mu.Unlock()
	sh.note(s.ID(), "%-14s attempt %d: reserved %s as %s", Reserve, m.Attempt(), o.Item, r)
	return ack.Accept()
}

// charge reads the reservation, charges the card (the provider times out
// on FlakyCard's first charge: a retry) and passes the payment on; its
// compensation refunds it.
func (sh *Shop) charge(_ context.Context, m *acemq.Message, s *slip.Slip) ack.Ack {
	o, bad := order(m)
	if bad != nil {
		return *bad
	}
	var r string
	if ok, err := s.Var("reservation", &r); !ok || err != nil {
		return ack.Retry(ack.Fatal(fmt.Errorf("no reservation to charge for (%v)", err)))
	}
	sh.mu.Lock()
	sh.charges[o.Card]++
	timedOut := o.Card == FlakyCard && sh.charges[o.Card] == 1
	sh.mu.Unlock()
	if timedOut {
		sh.note(s.ID(), "%-14s attempt %d: the payment provider timed out → retry", Charge, m.Attempt())
		return ack.Retry(errors.New("payment provider: timed out"))
	}
	p := "pay-" + s.ID()
	if err := errors.Join(s.SetVar("payment", p),
		s.Record(map[string]any{"payment": p, "cents": o.Cents}),
		s.Compensate(Refund, nil)); err != nil { // the refund reads the payment variable
		return ack.Retry(ack.Fatal(err))
	}
	sh.mu.Lock()
	sh.kept[p] = true
	sh.mu.Unlock()
	sh.note(s.ID(), "%-14s attempt %d: charged %d cents for %s as %s", Charge, m.Attempt(), o.Cents, r, p)
	return ack.Accept()
}

// ship hands the order to a courier; an address none serves fails for
// good, and the slip is compensated.
func (sh *Shop) ship(_ context.Context, m *acemq.Message, s *slip.Slip) ack.Ack {
	o, bad := order(m)
	if bad != nil {
		return *bad
	}
	if !Served[o.Address] {
		sh.note(s.ID(), "%-14s attempt %d: no courier serves %s → fatal", Ship, m.Attempt(), o.Address)
		return ack.Retry(ack.Fatal(fmt.Errorf("%w: %s", ErrNoCourier, o.Address)))
	}
	t := "trk-" + s.ID()
	if err := s.Record(map[string]string{"tracking": t}); err != nil {
		return ack.Retry(ack.Fatal(err))
	}
	sh.note(s.ID(), "%-14s attempt %d: handed to a courier in %s as %s", Ship, m.Attempt(), o.Address, t)
	return ack.Accept()
}

// release undoes reserve, with the reservation its compensation carries.
func (sh *Shop) release(_ context.Context, m *acemq.Message, u *slip.Undo) ack.Ack {
	var args struct {
		Reservation string `json:"reservation"`
	}
	if err := u.Args(&args); err != nil || args.Reservation == "" {
		return ack.Retry(ack.Fatal(fmt.Errorf("no reservation to release (%v)", err)))
	}
	sh.mu.Lock()
	delete(sh.held, args.Reservation)
	sh.mu.Unlock()
	sh.note(u.ID(), "%-14s attempt %d: released %s (undoing %s)", Release, m.Attempt(), args.Reservation, u.Stop())
	return ack.Accept()
}

// refund undoes charge, with the payment from the slip's variables.
func (sh *Shop) refund(_ context.Context, m *acemq.Message, u *slip.Undo) ack.Ack {
	var p string
	if ok, err := u.Var("payment", &p); !ok || err != nil {
		return ack.Retry(ack.Fatal(fmt.Errorf("no payment to refund (%v)", err)))
	}
	sh.mu.Lock()
	delete(sh.kept, p)
	sh.mu.Unlock()
	sh.note(u.ID(), "%-14s attempt %d: refunded %s (undoing %s)", Refund, m.Attempt(), p, u.Stop())
	return ack.Accept()
}
