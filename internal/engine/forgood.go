package engine

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/acemq/acemq/transport"
)

// refusedForGood reports whether err, from the publish of a copy by queue
// name (the default exchange), is the broker refusing every publish until
// an operator acts: the user's access withdrawn (403, or 530 as a
// reconnect is refused) or the vhost deleted (530 "vhost ... not found";
// a copy to the default exchange meets no other 404). A refusal for now
// (transport.ErrRefused: a connection limit, a vhost down) is not one: the
// transport waits it out.
func refusedForGood(err error) bool {
	if errors.Is(err, transport.ErrRefused) {
		return false
	}
	return errors.Is(err, transport.ErrAccessRefused) || errors.Is(err, transport.ErrNotFound)
}

// fail stops Run with err, the broker's reason, once: it is how a refusal
// for good met off the consumers' own path (a copy's publish) ends the
// run, as a consumer's ending does. It never blocks: Run takes the first
// failure only, and e.failed holds one per consumer, so when it is full a
// failure is already on its way.
func (e *Engine) fail(err error) {
	select {
	case e.failed <- err:
	default:
	}
}

// refusedCopy ends Run when the broker refused the copy of m for good
// (refusedForGood): publishing again cannot place it, and giving its
// original back would only bring it round again to the same refusal. The
// original goes back to the broker all the same (the copy's outcome is
// unknown to the caller), or the broker requeues it when the connection
// it came on dies.
func (c *consumer) refusedCopy(m message, to string, err error) {
	c.e.log.Error("acemq: the broker refuses the copy for good; the original goes back to the broker and Run ends",
		zap.String("queue", c.q.name), zap.String("id", m.ID()), zap.String("to", to), zap.Error(err))
	c.e.fail(fmt.Errorf("acemq: publish a copy of a message of queue %s to %s: %w", c.q.name, to, err))
}
