package acemq_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/memory"
)

// slowCancel is a transport whose consumers take a while to cancel, as a
// broker under load does: the window in which a stopping server still
// receives deliveries.
type slowCancel struct{ transport.Transport }

func (s slowCancel) Consume(ctx context.Context, q string, o transport.ConsumeOptions) (transport.Subscription, error) {
	sub, err := s.Transport.Consume(ctx, q, o)
	return slowSub{sub}, err
}

type slowSub struct{ transport.Subscription }

func (s slowSub) Cancel(ctx context.Context) error {
	time.Sleep(50 * time.Millisecond)
	return s.Subscription.Cancel(ctx)
}

// TestShutdownSpendsNoDeliveryBudget: messages that arrive while a stop
// waits for the broker to cancel the consumer are given back once, after
// the cancel, not round and round: on a quorum queue each return counts
// against its delivery limit (before RabbitMQ 4.3), and a loop of them
// would dead-letter messages nobody failed to handle.
func TestShutdownSpendsNoDeliveryBudget(t *testing.T) {
	t.Parallel()
	broker := memory.New()
	defer broker.Close()
	conn := broker.Connect()
	defer conn.Close()
	h := newBlocking()
	mux := acemq.NewMux()
	mux.Handle("orders", h)
	srv := &acemq.Server{Transport: slowCancel{conn}, Handler: mux, Concurrency: 2, Prefetch: 8, ShutdownTimeout: 5 * time.Second,
		Queues: map[string]acemq.QueueConfig{"orders": {Args: map[string]any{"x-queue-type": "quorum"}}}}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	<-srv.Ready()
	pub := &acemq.Publisher{Transport: conn, Mandatory: true}
	publish := func() {
		if _, err := pub.Publish(context.Background(), acemq.Outgoing{RoutingKey: "orders", Body: []byte("{}")}); err != nil {
			t.Error(err)
		}
	}
	publish()
	<-h.started // one worker busy, the other idle
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopped <- srv.Shutdown(ctx)
	}()
	for srv.CheckReady() == nil { // the stop has begun; the cancel takes 50 ms
		runtime.Gosched()
	}
	for range 3 {
		publish() // reach the idle worker of a consumer not yet cancelled
	}
	close(h.release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	<-done
	if n := len(broker.Peek("orders")); n != 3 {
		t.Errorf("%d messages back in the queue, want the 3 that came during the stop", n)
	}
	for _, d := range broker.Peek("orders") {
		if n := acemq.EnvelopeOf(d).DeliveryCount; n > 1 {
			t.Errorf("a message waiting in the prefetch went back %d times during the shutdown, want at most 1", n)
		}
	}
}
