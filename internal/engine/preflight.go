package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/acemq/acemq/transport"
)

// preflight checks, passively, that a queue the server may not declare
// has what the server will publish to: the queue itself, its .dlq and its
// .parked. A missing one stops Run with ErrMissingTopology, naming it and
// the command that declares it, rather than holding every dead letter
// unacknowledged later.
func (e *Engine) preflight(ctx context.Context, q *queueRun) error {
	for _, name := range []string{q.name, q.deadLetter, q.parked} {
		_, err := e.t.Inspect(ctx, name)
		switch {
		case errors.Is(err, transport.ErrNotFound):
			return fmt.Errorf("%w: declare is off for queue %s, and queue %s does not exist; declare it with: acemq topology --apply --queue %s (or Transport.Declare(ctx, acemq.Topology(...))): %w",
				ErrMissingTopology, q.name, name, q.name, err)
		case err != nil:
			return fmt.Errorf("acemq: check queue %s: %w", name, err)
		}
	}
	return nil
}
