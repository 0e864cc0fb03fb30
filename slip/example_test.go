package slip_test

import (
	"context"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/slip"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// A slip through two stops, the first passing a variable to the second,
// and its completed event read at the end (examples/routing-slip has the
// whole shop, with compensation).
func ExampleCourier() {
	b := memory.New(memory.WithRealClock())
	defer b.Close()
	conn := b.Connect()
	defer conn.Close()
	courier := &slip.Courier{Publisher: &acemq.Publisher{Transport: conn}}

	mux := acemq.NewMux()
	mux.Handle("stock.reserve", courier.Step(func(ctx context.Context, m *acemq.Message, s *slip.Slip) ack.Ack {
		_ = s.SetVar("reservation", "r-1")
		_ = s.Compensate("stock.release", nil)
		return ack.Accept()
	}))
	mux.Handle("card.charge", courier.Step(func(ctx context.Context, m *acemq.Message, s *slip.Slip) ack.Ack {
		var r string
		_, _ = s.Var("reservation", &r)
		_ = s.Record(map[string]string{"charged_for": r})
		return ack.Accept()
	}))
	srv := &acemq.Server{Transport: conn, Handler: mux}
	go func() { _ = srv.Run(context.Background()) }()
	defer srv.Shutdown(context.Background())
	<-srv.Ready()
	_ = conn.Declare(context.Background(), transport.Topology{Queues: []transport.Queue{{Name: "orders.slips", Durable: true}}})

	id, err := courier.Start(context.Background(), slip.Itinerary{ID: "order-7", Stops: []string{"stock.reserve", "card.charge"},
		Completed: slip.ToQueue("orders.slips")}, acemq.Outgoing{Body: []byte(`{"order":7}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	if !polltest.Until(10*time.Second, func() bool { return b.Depth("orders.slips") > 0 }) {
		fmt.Println("no event within 10s")
		return
	}
	ev := b.Peek("orders.slips")[0]
	doc, _ := slip.Read(ev.Headers)
	fmt.Println(id, ev.Headers[slip.EventHeader])
	for _, v := range doc.Visited {
		if v.Record == nil {
			fmt.Println(v.Stop)
			continue
		}
		fmt.Println(v.Stop, string(v.Record))
	}
	// Output:
	// order-7 completed
	// stock.reserve
	// card.charge {"charged_for":"r-1"}
}
