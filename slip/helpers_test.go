package slip_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/slip"
	"github.com/acemq/acemq/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shop is the example on the memory transport: reserve stock,
// charge the card, ship; releasing stock and refunding undo the first two.
// What fails, and how, each test says; the journal says what ran, in order.
type shop struct {
	t       *testing.T
	prefix  string            // of every queue name: a RabbitMQ run's own
	ts      *acemqtest.Server // on the memory transport; nil on RabbitMQ
	tr      transport.Transport
	peek    func(queue string) []transport.Delivery // the events queue's messages, left there
	courier *slip.Courier

	mu      sync.Mutex
	journal []string
	// fail is, per queue, the answer to give instead of doing the work,
	// for as many calls as it holds.
	fail map[string][]ack.Ack
}

var stops = []string{"stock.reserve", "card.charge", "shipping.ship"}

func newShop(t *testing.T, extra func(mux *acemq.Mux, c *slip.Courier), queues ...string) *shop {
	t.Helper()
	return newShopWith(t, nil, extra, queues...)
}

// newShopWith is newShop with every stop's and compensation's handler
// wrapped by wrap (a middleware), when it is not nil.
func newShopWith(t *testing.T, wrap acemq.Middleware, extra func(mux *acemq.Mux, c *slip.Courier), queues ...string) *shop {
	t.Helper()
	s := &shop{t: t, fail: map[string][]ack.Ack{}, courier: &slip.Courier{}}
	mux := s.mux(wrap, queues...)
	if extra != nil {
		extra(mux, s.courier)
	}
	s.ts = acemqtest.NewServer(t, mux, &acemq.Server{Retry: retry.Fixed(3, 10*time.Second).WithJitter(0)})
	s.courier.Publisher = &acemq.Publisher{Transport: s.ts.Conn}
	s.tr = s.ts.Conn
	s.peek = s.ts.Broker.Peek
	// The events' queue, which nothing here consumes: the tests read it.
	if err := s.ts.Conn.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: s.q("orders.slips"), Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// q is the queue of the shop's stop, compensation or events queue name.
func (s *shop) q(name string) string { return s.prefix + name }

// mux is the shop's stops and compensations (those named in queues, or
// all), each wrapped by wrap when it is not nil.
func (s *shop) mux(wrap acemq.Middleware, queues ...string) *acemq.Mux {
	mux := acemq.NewMux()
	if wrap != nil {
		mux.Use(wrap)
	}
	work := func(name string) slip.StepFunc {
		return func(ctx context.Context, m *acemq.Message, sl *slip.Slip) ack.Ack {
			if a, failed := s.failing(name); failed {
				return a
			}
			s.note(name)
			switch name {
			case "stock.reserve":
				_ = sl.SetVar("reservation", "r-"+sl.ID()[:4])
				_ = sl.Record(map[string]string{"reserved": "2 mugs"})
				_ = sl.Compensate(s.q("stock.release"), map[string]string{"why": "release"})
			case "card.charge":
				var r string
				if ok, err := sl.Var("reservation", &r); !ok || err != nil {
					return ack.Retry(ack.Fatal(errors.New("no reservation")))
				}
				_ = sl.SetVar("payment", "p-"+r)
				_ = sl.Compensate(s.q("card.refund"), nil)
			}
			return ack.Accept()
		}
	}
	undo := func(name string) slip.UndoFunc {
		return func(ctx context.Context, m *acemq.Message, u *slip.Undo) ack.Ack {
			if a, failed := s.failing(name); failed {
				return a
			}
			s.note(name)
			return ack.Accept()
		}
	}
	only := map[string]bool{}
	for _, q := range queues {
		only[q] = true
	}
	for _, q := range stops {
		if len(only) == 0 || only[q] {
			mux.Handle(s.q(q), s.courier.Step(work(q)))
		}
	}
	for _, q := range []string{"stock.release", "card.refund"} {
		if len(only) == 0 || only[q] {
			mux.Handle(s.q(q), s.courier.Compensation(undo(q)))
		}
	}
	return mux
}

func (s *shop) failing(name string) (ack.Ack, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.fail[name]; len(q) > 0 {
		s.fail[name] = q[1:]
		s.journal = append(s.journal, name+" failed")
		return q[0], true
	}
	return ack.Ack{}, false
}

func (s *shop) note(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.journal = append(s.journal, name)
}

func (s *shop) ran() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.journal...)
}

// start starts one slip of the shop's itinerary.
func (s *shop) start(id string) string {
	s.t.Helper()
	var names []string
	for _, q := range stops {
		names = append(names, s.q(q))
	}
	id, err := s.courier.Start(context.Background(), slip.Itinerary{ID: id, Name: "fulfil-order", Stops: names,
		Variables: map[string]any{"order": 7},
		Completed: slip.ToQueue(s.q("orders.slips")), Faulted: slip.ToQueue(s.q("orders.slips"))},
		acemq.Outgoing{Body: []byte(`{"order":7}`), ContentType: "application/json", Headers: map[string]any{"tenant": "acme"}})
	if err != nil {
		s.t.Fatal(err)
	}
	return id
}

// events are the slip events in orders.slips, by the slip read from each.
func (s *shop) events() []event {
	s.t.Helper()
	var out []event
	for _, d := range s.peek(s.q("orders.slips")) {
		doc, err := slip.Read(d.Headers)
		if err != nil {
			s.t.Fatalf("an event without a readable slip: %v", err)
		}
		out = append(out, event{kind: d.Headers[slip.EventHeader], id: d.Headers["x-acemq-id"], doc: doc, d: d})
	}
	return out
}

type event struct {
	kind, id any
	doc      *slip.Document
	d        transport.Delivery
}

func visitedStops(doc *slip.Document) []string {
	var out []string
	for _, v := range doc.Visited {
		out = append(out, v.Stop)
	}
	return out
}

func variable(t *testing.T, doc *slip.Document, name string) any {
	t.Helper()
	var v any
	if raw, ok := doc.Variables[name]; ok {
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
	}
	return v
}
