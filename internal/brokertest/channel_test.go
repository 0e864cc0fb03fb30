package brokertest_test

import (
	"errors"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/internal/brokertest"
)

// OnChannel hands f a working channel, returns f's error, and says why it
// could not connect without calling f.
func TestOnChannel(t *testing.T) {
	t.Parallel()
	called := false
	err := brokertest.OnChannel("amqp://guest:guest@127.0.0.1:1/", func(*amqp.Channel) error { called = true; return nil })
	if err == nil || called {
		t.Errorf("OnChannel on a port nothing listens on = %v, f called %v; want a dial error and f not called", err, called)
	}

	url := brokertest.SharedURL(t)
	q := brokertest.RandomName("brokertest-onchannel-")
	errDone := errors.New("done")
	err = brokertest.OnChannel(url, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare(q, false, false, true, false, nil); err != nil {
			return err
		}
		return errDone
	})
	if !errors.Is(err, errDone) {
		t.Fatalf("OnChannel = %v, want f's error", err)
	}
	// The queue was exclusive to a connection now closed: gone.
	err = brokertest.OnChannel(url, func(ch *amqp.Channel) error {
		_, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Errorf("the queue of a closed connection's channel: %v, want NOT_FOUND (was the connection closed?)", err)
	}
}
