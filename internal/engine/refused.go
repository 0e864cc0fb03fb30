package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acemq/acemq/delay"
	"github.com/acemq/acemq/transport"
	"go.uber.org/zap"
)

// A copy the broker would not take is never a silent loss (next.go). A
// queue with a dead-letter route of its own rejects the original to it.
// Any other original is held unacknowledged (it keeps a prefetch slot, so
// the consumer slows instead of losing) while the copy is tried again with
// backoff, after declaring the missing queue again where the server may
// declare: until a copy is placed, a stop gives the original back, or the
// outcome turns unknown (then it goes back too).

// refusal is why the broker refused a copy, for the log and the metric.
type refusal struct {
	why    string // "missing", "nacked" or "refused": the why attribute
	detail string // for the log line
}

// setAsideFailed finds out why the broker refused the copy of was (its
// last publish went as r) and counts acemq.messages.set.aside.failed.
func (c *consumer) setAsideFailed(s settling, was plan, r published) refusal {
	why := c.whyRefused(was.copy.to, r)
	c.e.inst.setAsideFailed.Add(s.ctx, 1, c.heldAttrs(was.copy.to, why.why))
	return why
}

// whyRefused names why the broker refused a copy to queue: "missing" (no
// such queue), "nacked" (the queue exists and refuses: full under
// reject-publish, or without a leader) or "refused".
func (c *consumer) whyRefused(queue string, r published) refusal {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.e.t.Inspect(ctx, queue)
	switch {
	case errors.Is(err, transport.ErrNotFound):
		return refusal{"missing", "the queue " + queue + " does not exist"}
	case err == nil && r == copyNacked:
		return refusal{"nacked", fmt.Sprintf("the queue %s exists with %d messages ready and nacked every try: full under x-overflow reject-publish, or without a leader", queue, info.Messages)}
	case r == copyNacked:
		return refusal{"nacked", "the broker nacked every try"}
	}
	return refusal{"refused", "no queue took it"}
}

// redeclare declares the queue's topology again, where the server may
// declare, because missing (a rung, a .dlq, a delay level) was deleted
// under it: the next copy then finds it. Declaring is idempotent.
func (c *consumer) redeclare(missing string) {
	if !c.q.declare {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.e.publishTimeout)
	defer cancel()
	if strings.HasPrefix(missing, delay.Prefix) {
		if err := c.e.declareDelays(ctx); err != nil {
			c.e.log.Warn("acemq: declare the delay queues again", zap.String("queue", c.q.name), zap.String("missing", missing), zap.Error(err))
			return
		}
	}
	if err := c.e.declare(ctx, c.q); err != nil {
		c.e.log.Warn("acemq: declare a missing queue again", zap.String("queue", c.q.name), zap.String("missing", missing), zap.Error(err))
		return
	}
	c.e.log.Info("acemq: declared a missing queue again", zap.String("queue", c.q.name), zap.String("missing", missing))
}
