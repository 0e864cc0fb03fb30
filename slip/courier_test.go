package slip_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/idempotency"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/slip"
	"github.com/acemq/acemq/transport"
)

// TestSlipCompletes: a slip through three stops, the variables the first
// sets read by the second, each stop's record kept, the application's
// headers and the payload carried, and its completed event in
// orders.slips with the id derived from the slip's.
func TestSlipCompletes(t *testing.T) {
	s := newShop(t, nil)
	id := s.start("")
	s.ts.RunUntilIdle(t)
	if got, want := s.ran(), stops; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	evs := s.events()
	if len(evs) != 1 {
		t.Fatalf("%d events, want one completed", len(evs))
	}
	e := evs[0]
	if e.kind != slip.StateCompleted || e.id != id+".completed" || e.doc.State != slip.StateCompleted || e.doc.ID != id {
		t.Errorf("event %v id %v state %s slip %s", e.kind, e.id, e.doc.State, e.doc.ID)
	}
	if got := visitedStops(e.doc); !slices.Equal(got, stops) {
		t.Errorf("visited %v", got)
	}
	if string(e.doc.Visited[0].Record) != `{"reserved":"2 mugs"}` {
		t.Errorf("stock.reserve's record %s", e.doc.Visited[0].Record)
	}
	if v := variable(t, e.doc, "payment"); v != "p-r-"+id[:4] {
		t.Errorf("payment %v: the second stop did not read the first's variable", v)
	}
	if v := variable(t, e.doc, "order"); v != float64(7) {
		t.Errorf("the starting variable order = %v", v)
	}
	if string(e.d.Body) != `{"order":7}` || e.d.ContentType != "application/json" || e.d.Headers["tenant"] != "acme" {
		t.Errorf("the payload did not travel: body %s, content type %q, tenant %v", e.d.Body, e.d.ContentType, e.d.Headers["tenant"])
	}
	if len(e.doc.Compensations) != 2 || len(e.doc.Compensated) != 0 {
		t.Errorf("compensations %v, compensated %v: registered, none run", e.doc.Compensations, e.doc.Compensated)
	}
}

// TestSlipStepRetriedThenSucceeds: a stop that fails twice retries on its
// queue's ladder, then the slip goes on, every stop visited once.
func TestSlipStepRetriedThenSucceeds(t *testing.T) {
	s := newShop(t, nil)
	down := ack.Retry(errors.New("the payment provider is down"))
	s.fail["card.charge"] = []ack.Ack{down, down}
	s.start("")
	s.ts.RunUntilIdle(t)
	want := []string{"stock.reserve", "card.charge failed", "card.charge failed", "card.charge", "shipping.ship"}
	if got := s.ran(); !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	if evs := s.events(); len(evs) != 1 || evs[0].kind != slip.StateCompleted || !slices.Equal(visitedStops(evs[0].doc), stops) {
		t.Fatalf("events %+v, want one completed, each stop visited once", evs)
	}
}

// TestSlipFailsForGoodAndCompensates: the last stop fails for good (its
// attempts spent): the refund runs, then the stock release, the last
// registered first; the faulted event says why and what was compensated;
// the stop's dead letter says compensation began.
func TestSlipFailsForGoodAndCompensates(t *testing.T) {
	s := newShop(t, nil)
	broken := ack.Retry(errors.New("no courier in the area"))
	s.fail["shipping.ship"] = []ack.Ack{broken, broken, broken}
	id := s.start("")
	s.ts.RunUntilIdle(t)
	want := []string{"stock.reserve", "card.charge", "shipping.ship failed", "shipping.ship failed", "shipping.ship failed", "card.refund", "stock.release"}
	if got := s.ran(); !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	evs := s.events()
	if len(evs) != 1 || evs[0].kind != slip.StateFaulted || evs[0].id != id+".faulted" {
		t.Fatalf("events %+v, want one faulted", evs)
	}
	doc := evs[0].doc
	if doc.Fault == nil || doc.Fault.Stop != "shipping.ship" || !strings.Contains(doc.Fault.Reason, "no courier") {
		t.Errorf("fault %+v", doc.Fault)
	}
	if len(doc.Compensated) != 2 || doc.Compensated[0].Queue != "card.refund" || doc.Compensated[1].Queue != "stock.release" || len(doc.Compensations) != 0 {
		t.Errorf("compensated %+v, left %+v", doc.Compensated, doc.Compensations)
	}
	dead := s.ts.DeadLetters("shipping.ship")
	if len(dead) != 1 {
		t.Fatalf("%d dead letters in shipping.ship.dlq", len(dead))
	}
	if d, err := slip.Read(dead[0].Headers); err != nil || d.State != slip.StateCompensating || d.Fault == nil {
		t.Errorf("the dead letter's slip: %+v, %v; want it compensating, with the fault", d, err)
	}

	// Replayed after it was compensated, the stop does not run: parked.
	if _, err := acemq.Replay(context.Background(), s.ts.Conn, "shipping.ship.dlq", acemq.ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
	s.ts.RunUntilIdle(t)
	parked := s.ts.Parked("shipping.ship")
	if len(parked) != 1 || !strings.Contains(parked[0].Reason(), "was compensated") {
		t.Fatalf("parked %+v, want the replayed stop parked as compensated", parked)
	}
	if got := s.ran(); len(got) != len(want) {
		t.Errorf("ran %v after the replay: the stop ran again", got)
	}
}

// TestSlipFaultsWithNothingToUndo: the first stop fails for good (fatal):
// nothing was registered, so the faulted event goes at once, and the
// dead letter stays running at its stop: replayed, the slip goes on and
// completes.
func TestSlipFaultsWithNothingToUndo(t *testing.T) {
	s := newShop(t, nil)
	s.fail["stock.reserve"] = []ack.Ack{ack.Retry(ack.Fatal(errors.New("unknown product")))}
	id := s.start("")
	s.ts.RunUntilIdle(t)
	evs := s.events()
	if len(evs) != 1 || evs[0].kind != slip.StateFaulted || len(evs[0].doc.Compensated) != 0 {
		t.Fatalf("events %+v, want one faulted, nothing compensated", evs)
	}
	dead := s.ts.DeadLetters("stock.reserve")
	if len(dead) != 1 {
		t.Fatalf("%d dead letters", len(dead))
	}
	if d, err := slip.Read(dead[0].Headers); err != nil || d.State != slip.StateRunning || d.Fault == nil || d.Itinerary[0] != "stock.reserve" {
		t.Fatalf("the dead letter's slip %+v, %v: want it running at its stop, the fault noted", d, err)
	}
	if _, err := acemq.Replay(context.Background(), s.ts.Conn, "stock.reserve.dlq", acemq.ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
	s.ts.RunUntilIdle(t)
	evs = s.events()
	if len(evs) != 2 || evs[1].kind != slip.StateCompleted || evs[1].id != id+".completed" || evs[1].doc.Fault != nil {
		t.Fatalf("after the replay: events %+v, want the slip completed", evs)
	}
}

// TestSlipNextStopMissing: the next stop's queue does not exist: the step
// does not accept, it retries on its ladder, naming the missing stop, and
// once the queue is there the slip goes on; nothing is lost.
func TestSlipNextStopMissing(t *testing.T) {
	s := newShop(t, nil, "stock.reserve", "stock.release") // card.charge is served nowhere yet: no queue
	s.start("")
	s.ts.RunUntilIdle(t) // three attempts, all unroutable: given up on, compensated
	// Start another, and this time the queue appears after the first try.
	s2 := newShop(t, nil, "stock.reserve", "stock.release")
	s2.fail = map[string][]ack.Ack{}
	s2.start("")
	s2.ts.Advance(t, 0) // the first try, unroutable
	if err := s2.ts.Conn.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: "card.charge", Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	s2.ts.RunUntilIdle(t)
	if got := s2.ts.Queue("card.charge"); len(got) != 1 {
		t.Fatalf("card.charge holds %d, want the slip once the queue exists", len(got))
	}
	if got := s2.ran(); !slices.Equal(got, []string{"stock.reserve", "stock.reserve"}) {
		t.Errorf("ran %v, want stock.reserve twice: once refused onward, once sent on", got)
	}
	// The first: every attempt refused onward, then given up on and
	// compensated (its own release), nothing lost.
	dead := s.ts.DeadLetters("stock.reserve")
	if len(dead) != 1 || !strings.Contains(dead[0].Reason(), "card.charge") {
		t.Fatalf("dead letters %+v, want the stop given up on naming the missing stop", dead)
	}
	if evs := s.events(); len(evs) != 1 || evs[0].kind != slip.StateFaulted || len(evs[0].doc.Compensated) != 1 || evs[0].doc.Compensated[0].Queue != "stock.release" {
		t.Fatalf("events %+v, want the slip faulted with the stop's own reservation released", evs)
	}
	if got, want := s.ran(), []string{"stock.reserve", "stock.reserve", "stock.reserve", "stock.release"}; !slices.Equal(got, want) {
		t.Errorf("ran %v, want %v: the stop did its work each attempt, and it is undone once", got, want)
	}
}

// TestSlipWithNoStops: a slip started with no stops completes at once.
func TestSlipWithNoStops(t *testing.T) {
	s := newShop(t, nil)
	id, err := s.courier.Start(context.Background(), slip.Itinerary{Completed: slip.ToQueue("orders.slips")}, acemq.Outgoing{Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if evs := s.events(); len(evs) != 1 || evs[0].kind != slip.StateCompleted || evs[0].id != id+".completed" {
		t.Fatalf("events %+v, want it completed at once", evs)
	}
	if _, err := s.courier.Start(context.Background(), slip.Itinerary{}, acemq.Outgoing{}); err == nil {
		t.Error("a slip with no stops and no completed destination was started")
	}
}

// TestSlipParksWhatIsNotASlip: a step parks, with the reason, a message
// with no slip, a slip of an unknown version, and a slip for another stop.
func TestSlipParksWhatIsNotASlip(t *testing.T) {
	s := newShop(t, nil)
	pub := &acemq.Publisher{Transport: s.ts.Conn, Mandatory: true}
	for _, h := range []map[string]any{
		nil,
		{slip.Header: `{"v":2,"id":"x"}`},
		{slip.Header: `{"v":1,"id":"x","state":"running","itinerary":["card.charge"]}`},
		{slip.Header: int64(7)},
	} {
		if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "stock.reserve", Headers: h}); err != nil {
			t.Fatal(err)
		}
	}
	s.ts.RunUntilIdle(t)
	parked := s.ts.Parked("stock.reserve")
	var reasons []string
	for _, p := range parked {
		reasons = append(reasons, p.Reason())
	}
	if len(reasons) != 4 {
		t.Fatalf("parked %q, want all four", reasons)
	}
	for _, want := range []string{"not a routing slip", "version 2", "is for stop card.charge", "not a JSON string"} {
		if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, want) }) {
			t.Errorf("parked reasons %q: none says %q", reasons, want)
		}
	}
	if got := s.ran(); len(got) != 0 {
		t.Errorf("ran %v", got)
	}
}

// TestSlipRedeliveredStepDeduplicated: the same hop delivered twice (the
// slip started twice with one id, as a starter that crashed after its
// publish would) is one message to the idempotency middleware, by the
// x-acemq-id derived from the slip's: every stop runs once, one event.
func TestSlipRedeliveredStepDeduplicated(t *testing.T) {
	s := newShopWith(t, middleware.Idempotent(idempotency.NewMemory(time.Hour)), nil)
	s.start("order-7")
	s.start("order-7")
	s.ts.RunUntilIdle(t)
	if got := s.ran(); !slices.Equal(got, stops) {
		t.Fatalf("ran %v, want each stop once", got)
	}
	if evs := s.events(); len(evs) != 1 || evs[0].id != "order-7.completed" {
		t.Fatalf("events %+v, want one completed", evs)
	}
}

// TestSlipHalfCompensated: a compensation that fails for good is
// dead-lettered with the whole slip, and the faulted event says
// half-compensated; replaying its dead letter goes on compensating, and
// the faulted event follows.
func TestSlipHalfCompensated(t *testing.T) {
	s := newShop(t, nil)
	s.fail["shipping.ship"] = []ack.Ack{ack.Retry(ack.Fatal(errors.New("no courier serves the address")))}
	s.fail["card.refund"] = []ack.Ack{ack.Retry(ack.Fatal(errors.New("the card is closed")))}
	id := s.start("")
	s.ts.RunUntilIdle(t)
	evs := s.events()
	if len(evs) != 1 || evs[0].kind != slip.StateHalfCompensated || evs[0].id != id+".half-compensated" {
		t.Fatalf("events %+v, want one half-compensated", evs)
	}
	f := evs[0].doc.Fault
	if f == nil || f.Stop != "shipping.ship" || f.Compensation != "card.refund" || !strings.Contains(f.CompensationReason, "card is closed") {
		t.Errorf("fault %+v", f)
	}
	if len(evs[0].doc.Compensations) != 2 || len(evs[0].doc.Compensated) != 0 {
		t.Errorf("still to compensate %v, compensated %v: want both left", evs[0].doc.Compensations, evs[0].doc.Compensated)
	}
	dead := s.ts.DeadLetters("card.refund")
	if len(dead) != 1 {
		t.Fatalf("%d dead letters in card.refund.dlq", len(dead))
	}
	if d, err := slip.Read(dead[0].Headers); err != nil || d.State != slip.StateCompensating || d.Fault.Compensation != "card.refund" {
		t.Fatalf("the dead letter's slip %+v, %v: want the whole slip, compensating", d, err)
	}
	if _, err := acemq.Replay(context.Background(), s.ts.Conn, "card.refund.dlq", acemq.ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
	s.ts.RunUntilIdle(t)
	want := []string{"stock.reserve", "card.charge", "shipping.ship failed", "card.refund failed", "card.refund", "stock.release"}
	if got := s.ran(); !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	evs = s.events()
	if len(evs) != 2 || evs[1].kind != slip.StateFaulted || evs[1].id != id+".faulted" || len(evs[1].doc.Compensated) != 2 {
		t.Fatalf("after the replay: events %+v, want the faulted event, both compensated", evs)
	}
}

// TestSlipTooLarge: a step whose variable would grow the slip past
// MaxSize fails for good, and its compensations run (the slip sent on to
// them is the one it received, within bounds); a slip that arrives over
// MaxSize is parked, never taken.
func TestSlipTooLarge(t *testing.T) {
	big := strings.Repeat("x", slip.MaxSize)
	s := newShop(t, func(mux *acemq.Mux, c *slip.Courier) {
		mux.Handle("bloat", c.Step(func(ctx context.Context, m *acemq.Message, sl *slip.Slip) ack.Ack {
			_ = sl.SetVar("blob", big)
			return ack.Accept()
		}))
	})
	id, err := s.courier.Start(context.Background(), slip.Itinerary{Stops: []string{"stock.reserve", "bloat", "shipping.ship"},
		Faulted: slip.ToQueue("orders.slips")}, acemq.Outgoing{Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	s.ts.RunUntilIdle(t)
	evs := s.events()
	if len(evs) != 1 || evs[0].kind != slip.StateFaulted || evs[0].doc.ID != id || !strings.Contains(evs[0].doc.Fault.Reason, "over the") {
		t.Fatalf("events %+v, want the slip faulted for its size", evs)
	}
	if got := s.ran(); !slices.Equal(got, []string{"stock.reserve", "stock.release"}) {
		t.Errorf("ran %v, want the reservation released", got)
	}
	pub := &acemq.Publisher{Transport: s.ts.Conn, Mandatory: true}
	huge := `{"v":1,"id":"h","state":"running","itinerary":["stock.reserve"],"variables":{"blob":"` + big + `"}}`
	if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "stock.reserve", Headers: map[string]any{slip.Header: huge}}); err != nil {
		t.Fatal(err)
	}
	s.ts.RunUntilIdle(t)
	if p := s.ts.Parked("stock.reserve"); len(p) != 1 || !strings.Contains(p[0].Reason(), "over the") {
		t.Fatalf("parked %+v, want the oversized slip parked for its size", p)
	}
}

// TestSlipCompensationQueueMissing: a stop given up on while the queue of
// the compensation to run first does not exist (its service not deployed
// yet): the stop's dead letter is not published and its message is held,
// unacknowledged, until the queue is there; then the compensation runs
// and the dead letter follows. Nothing is dropped on the way.
func TestSlipCompensationQueueMissing(t *testing.T) {
	s := newShop(t, nil, "stock.reserve", "card.charge", "shipping.ship", "stock.release") // no card.refund
	s.fail["shipping.ship"] = []ack.Ack{ack.Retry(ack.Fatal(errors.New("no courier serves the address")))}
	s.start("")
	polltest.Eventually(t, "the stop given up on, held for its compensation", func() bool {
		return slices.Contains(s.ran(), "shipping.ship failed") && s.ts.Broker.Unacked("shipping.ship") == 1
	})
	if n := s.ts.Broker.Depth("shipping.ship.dlq"); n != 0 {
		t.Fatalf("%d dead letters published before the compensation could be", n)
	}
	if err := s.ts.Conn.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: "card.refund", Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	polltest.Eventually(t, "the compensation sent and the dead letter published", func() bool {
		return s.ts.Broker.Depth("card.refund") == 1 && s.ts.Broker.Depth("shipping.ship.dlq") == 1
	})
}

// TestSlipEventsToAnExchange: events go where the slip says, here an
// exchange with a routing key; an event that reaches no queue (nothing
// bound yet) makes the last stop retry, as a missing stop does, and it
// arrives once the binding is there.
func TestSlipEventsToAnExchange(t *testing.T) {
	s := newShop(t, nil)
	ctx := context.Background()
	if err := s.ts.Conn.Declare(ctx, transport.Topology{Exchanges: []transport.Exchange{{Name: "orders.events", Kind: "topic", Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	id, err := s.courier.Start(ctx, slip.Itinerary{Stops: stops, Completed: slip.ToExchange("orders.events", "slip.completed")}, acemq.Outgoing{Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	s.ts.Advance(t, 0) // the last stop's first try: its event reaches no queue
	if got := s.ran(); !slices.Equal(got, stops) {
		t.Fatalf("ran %v", got)
	}
	if err := s.ts.Conn.Declare(ctx, transport.Topology{Bindings: []transport.Binding{{Queue: "orders.slips", Exchange: "orders.events", Key: "slip.*"}}}); err != nil {
		t.Fatal(err)
	}
	s.ts.RunUntilIdle(t)
	evs := s.events()
	if len(evs) != 1 || evs[0].kind != slip.StateCompleted || evs[0].id != id+".completed" {
		t.Fatalf("events %+v, want the completed event through the exchange", evs)
	}
	if got := s.ran(); !slices.Equal(got, append(slices.Clone(stops), "shipping.ship")) {
		t.Errorf("ran %v, want the last stop twice: its event refused once", got)
	}
	if n := len(s.ts.DeadLetters("shipping.ship")); n != 0 {
		t.Errorf("%d dead letters", n)
	}
}
