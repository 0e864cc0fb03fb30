// Package slip carries routing slips: a message that holds its own
// itinerary, visiting one queue (a stop) after another, each stop doing
// its work and the package forwarding the message, with the variables
// steps pass on, a record of what each did, and compensations run in
// reverse when a later stop fails for good. It is the simplest workflow a
// messaging library can offer without a saga store: the state travels in
// the message (the header x-acemq-slip, a JSON document that every AceMQ
// library reads; docs/wire-contract.md, "Routing slips (v1)").
//
//	c := &slip.Courier{Publisher: pub}
//	mux.Handle("stock.reserve", c.Step(reserve))    // s.Compensate("stock.release", r)
//	mux.Handle("card.charge", c.Step(charge))       // s.Compensate("card.refund", p)
//	mux.Handle("shipping.ship", c.Step(ship))
//	mux.Handle("stock.release", c.Compensation(release))
//	mux.Handle("card.refund", c.Compensation(refund))
//	id, err := c.Start(ctx, slip.Itinerary{
//		Stops:     []string{"stock.reserve", "card.charge", "shipping.ship"},
//		Completed: slip.ToQueue("orders.slips"), Faulted: slip.ToQueue("orders.slips"),
//	}, body)
//
// # What a stop's answer does
//
// A step's accept sends the slip on to the next stop, a confirmed and
// mandatory publish, before the message is acknowledged; after the last
// stop, the completed event. A next stop that reaches no queue makes the
// step retry on its queue's ladder instead: nothing is lost, and the step
// runs again, so steps must be idempotent (each hop's x-acemq-id is
// derived from the slip's id, for the idempotency middleware). A retry
// follows the step's queue's ladder as any retry does. When the server
// gives up on a step (its attempts spent, too old, fatal, rejected), the
// compensations registered so far run, the last first, each at its own
// queue (Courier.Compensation), and then the faulted event goes; the step's
// dead letter is published only once the first of them is on its way
// (acemq.Message.BeforeDeadLetter). A compensation that fails for good is
// dead-lettered with the slip's whole state, and the faulted event says
// the slip is half-compensated; replaying that dead letter goes on
// compensating.
//
// # Idempotent steps
//
// Every hop's x-acemq-id is derived from the slip's id (<id>.<n> to the
// stop after n visited, <id>.c<k> to the k-th compensation), so a hop
// published twice, by a step whose process died between its publish and
// its ack, is one message to the idempotency middleware or to a claim in
// the step's own transaction (idempotency.Postgres.ClaimTx). A step that
// finds its work already done must still set its variables, its record
// and its compensation before it accepts: the slip it sends on is built
// from what this delivery registered, and one sent on without the
// compensation would leave the work undone if a later stop fails.
//
// A step parks, with the reason, what it cannot take as a slip at its
// stop: no slip, a version it does not know, a slip at another stop, or a
// slip whose compensation began (a faulted stop replayed after it was
// compensated: the slip is over; start a new one).
package slip
