package brokertest

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestBoundedEndsItsChildren: a command whose child keeps its output open
// (as rabbitmqctl's VM does) returns once its context ends, rather than
// when the child does.
func TestBoundedEndsItsChildren(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := bounded(exec.CommandContext(ctx, "sh", "-c", "sleep 600 & sleep 600")).CombinedOutput()
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the command ended well, want it killed")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the command did not return a minute after its context ended: its child holds its output")
	}
}
