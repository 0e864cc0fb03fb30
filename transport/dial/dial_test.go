package dial_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/transport"
	"github.com/acemq/acemq/transport/dial"
)

// TestDialMemory: two dials of one memory:// URL meet on one broker; another
// name is another broker.
func TestDialMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, err := dial.Transport(ctx, "memory://"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := dial.Transport(ctx, "MEMORY://"+t.Name())
	defer b.Close()
	other, _ := dial.Transport(ctx, "memory://"+t.Name()+".other")
	defer other.Close()
	if err := a.Declare(ctx, transport.Topology{Queues: []transport.Queue{{Name: "orders", Durable: true}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Inspect(ctx, "orders"); err != nil {
		t.Errorf("the same URL reached another broker: %v", err)
	}
	if _, err := other.Inspect(ctx, "orders"); !errors.Is(err, transport.ErrNotFound) {
		t.Errorf("another name reached the same broker: %v", err)
	}
}

// TestDialRefusesWithoutShowingTheURL: a URL with no known scheme is
// refused, and the error quotes nothing of it, password included.
func TestDialRefusesWithoutShowingTheURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://guest:s3cret@host/", "guest:s3cret@host:5672", "", "amqp:/guest:s3cret@host", "amqp://guest:s3cret@ho st:5672/%zz"} {
		tr, err := dial.Transport(context.Background(), u)
		if err == nil || tr != nil {
			t.Errorf("Transport(%q) = %v, %v; want an error and no transport", u, tr, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Transport(%q) shows the password: %v", u, err)
		}
	}
}

// TestDialRabbitMQ: an amqp:// URL gives a RabbitMQ transport.
func TestDialRabbitMQ(t *testing.T) {
	t.Parallel()
	url := brokertest.SharedURL(t)
	tr, err := dial.Transport(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if _, ok := tr.(transport.Versioned); !ok {
		t.Errorf("Transport(amqp://...) = %T, want the RabbitMQ transport", tr)
	}
	if _, err := tr.Inspect(context.Background(), "acemq.dial-test.no-such-queue"); !errors.Is(err, transport.ErrNotFound) {
		t.Errorf("Inspect = %v, want ErrNotFound from the broker", err)
	}
}
