package memory_test

import (
	"errors"
	"testing"

	"github.com/acemq/acemq/transport"
)

// TestCancelConsumers: the broker's basic.cancel ends every consumer of
// the queue with ErrCancelled and leaves the queue, its ready messages and
// what the consumers hold in place: a held delivery still acks, and a new
// consumer gets the rest.
func TestCancelConsumers(t *testing.T) {
	f := setup(t)
	f.queue("q", nil)
	f.send("q", "a")
	f.send("q", "b")
	sub := f.consume("q", 1)
	held := f.recv(sub, "a")
	if n := f.b.CancelConsumers("q"); n != 1 {
		t.Fatalf("CancelConsumers = %d, want 1", n)
	}
	for range sub.Deliveries() {
		t.Fatal("a delivery after the cancel")
	}
	if err := sub.Err(); !errors.Is(err, transport.ErrCancelled) {
		t.Fatalf("Err = %v, want ErrCancelled", err)
	}
	f.ack(held)
	if n := f.b.CancelConsumers("q"); n != 0 {
		t.Fatalf("CancelConsumers again = %d, want 0: none left", n)
	}
	if n := f.b.CancelConsumers("missing"); n != 0 {
		t.Fatalf("CancelConsumers of a missing queue = %d, want 0", n)
	}
	next := f.consume("q", 1)
	f.recv(next, "b")
	if f.b.Depth("q") != 0 || f.b.Unacked("q") != 1 {
		t.Fatalf("depth %d unacked %d, want 0 and 1", f.b.Depth("q"), f.b.Unacked("q"))
	}
}
