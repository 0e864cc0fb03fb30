package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/transport"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// countedGets fails the test's check when its Get is called.
type countedGets struct {
	transport.Transport
	gets *atomic.Int32
}

func (c countedGets) Get(ctx context.Context, queue string) (transport.Delivery, bool, error) {
	c.gets.Add(1)
	return c.Transport.Get(ctx, queue)
}

// unreadableGets answers every Get as amqp091-go does when the delivery
// at the head of the queue holds headers nested deeper than 32.
type unreadableGets struct{ transport.Transport }

func (unreadableGets) Get(_ context.Context, queue string) (transport.Delivery, bool, error) {
	return transport.Delivery{}, false, fmt.Errorf("acemq: get from queue %q: %w", queue,
		&amqp.Error{Code: amqp.FrameError, Reason: amqp.ErrSyntax.Error()})
}

// TestReadPathOwnConnection: peek, triage and replay take messages only on
// the transport they dial for the read, never on the command's; and when
// that one meets a delivery amqp091-go cannot read, the error wraps
// ErrUnreadable and says the server's advice, not the bare frame error.
func TestReadPathOwnConnection(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"peek", "--queue", "orders.dlq"},
		{"triage", "orders.dlq"},
		{"replay", "--queue", "orders"},
	} {
		b, _ := memoryBroker(t, "orders", "exhausted 3 attempts: warehouse timeout", "the handler rejected it: no such customer")
		var commandGets, readerGets atomic.Int32
		dials := 0
		dial := func(context.Context, string) (transport.Transport, error) {
			if dials++; dials == 1 {
				return countedGets{Transport: b.Connect(), gets: &commandGets}, nil
			}
			return countedGets{Transport: b.Connect(), gets: &readerGets}, nil
		}
		code, out, errOut := cli(t, dial, append(args, "--url", "amqp://localhost")...)
		if code != 0 || dials != 2 || commandGets.Load() != 0 || readerGets.Load() == 0 {
			t.Errorf("%q: status %d, %d dials, %d gets on the command's transport, %d on the reader's\n%s%s",
				args, code, dials, commandGets.Load(), readerGets.Load(), out, errOut)
		}

		dials, held := 0, len(dlqIDs(b, "orders")) // replay moved them: none left to read
		poisoned := func(context.Context, string) (transport.Transport, error) {
			if dials++; dials == 1 {
				return countedGets{Transport: b.Connect(), gets: &commandGets}, nil
			}
			return unreadableGets{Transport: b.Connect()}, nil
		}
		code, out, errOut = cli(t, poisoned, append(args, "--url", "amqp://localhost")...)
		if code != 1 || !strings.Contains(errOut, rabbitmq.UnreadableAdvice("orders.dlq")) || !strings.Contains(errOut, "(amqp091-go: ") {
			t.Errorf("%q on a poison: status %d, want 1 with the advice\n%s%s", args, code, out, errOut)
		}
		if n := len(dlqIDs(b, "orders")); n != held {
			t.Errorf("%q on a poison: %d left in orders.dlq, want %d", args, n, held)
		}
	}
	err := (&unreadableError{queue: "q", err: errors.New("x")})
	if !errors.Is(err, rabbitmq.ErrUnreadable) || !isUnreadable(err) {
		t.Error("unreadableError does not wrap ErrUnreadable")
	}
}

// TestReadCostGate: a read of a work queue, or of a queue whose delivery
// limit it counts against, says its cost before it reads; one that would
// spend a delivery budget (or, for a work queue, might) is refused
// without --spend-deliveries, and nothing is read; a .dlq without a limit
// is read at once, without a word.
func TestReadCostGate(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders", "exhausted 3 attempts: warehouse timeout")
	conn := b.Connect()
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Publish(context.Background(), transport.Publishing{RoutingKey: "orders", Mandatory: true,
		Headers: map[string]any{acemq.HeaderID: "w-1"}, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	srv := fakeManagement(t, "3.10.8", true, map[string]map[string]any{
		"orders.dlq": {"type": "classic", "arguments": map[string]any{}, "effective_policy_definition": []any{}},
		"orders":     {"type": "quorum", "arguments": map[string]any{"x-delivery-limit": 2, "x-dead-letter-exchange": "acemq.dlx"}, "effective_policy_definition": map[string]any{}},
	})
	u := "amqp://guest:guest@localhost/"
	for _, c := range []struct {
		args   []string
		code   int
		stderr string // what stderr holds ("" for nothing at all)
		read   bool
	}{
		{[]string{"peek", "--queue", "orders.dlq"}, 0, "", true},
		{[]string{"triage", "orders.dlq"}, 0, "", true},
		{[]string{"peek", "--queue", "orders"}, 1, "it has a delivery limit of 2 (its x-delivery-limit argument): a read counts one delivery of every message it reads against it", false},
		{[]string{"triage", "orders"}, 1, "give --spend-deliveries to read it all the same", false},
		{[]string{"peek", "--queue", "orders", "--spend-deliveries"}, 0, "reading it all the same (--spend-deliveries)", true},
	} {
		before := b.Peek("orders")[0].Redelivered
		code, out, errOut := cli(t, dial, append(c.args, "--url", u, "--management", srv.URL)...)
		if code != c.code || (c.stderr == "") != (errOut == "") || !strings.Contains(errOut, c.stderr) {
			t.Errorf("%q: status %d, want %d with %q on stderr\n%s%s", c.args, code, c.code, c.stderr, out, errOut)
		}
		if c.code == 1 && (out != "" || b.Peek("orders")[0].Redelivered != before) {
			t.Errorf("%q: refused, but it read:\n%s", c.args, out)
		}
	}
	// Without a management API to ask, a work queue's limit cannot be
	// told: refused; a .dlq is read, with a note saying so.
	code, _, errOut := cli(t, dial, "peek", "--url", u, "--management", "http://127.0.0.1:1", "--queue", "orders")
	if code != 1 || !strings.Contains(errOut, "whether a read counts against a delivery limit is not known") {
		t.Errorf("work queue, no management API: %d\n%s", code, errOut)
	}
	code, _, errOut = cli(t, dial, "peek", "--url", u, "--management", "http://127.0.0.1:1", "--queue", "orders.dlq")
	if code != 0 || !strings.Contains(errOut, "note: orders.dlq is a dead-letter queue; whether a read counts against a delivery limit is not known") {
		t.Errorf(".dlq, no management API: %d\n%s", code, errOut)
	}
}
