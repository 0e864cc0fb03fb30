package engine

import (
	"context"
	"errors"
	"sync"

	"go.uber.org/zap"

	"github.com/acemq/acemq/transport"
)

// ErrAwaitingHandlers is what CheckReady says while a queue deleted under
// the server has been declared again and waits for the handlers still
// running on its old subscription before it is consumed again.
var ErrAwaitingHandlers = errors.New("declared again; consumed again once the handlers still running on its deleted subscription return")

// awaitWorkers waits for the workers of sub to end. When the broker ends
// sub because the queue was deleted while handlers still run (a long job
// holds a worker for up to HandlerTimeout), the queue is declared again at
// once, where the server may declare, rather than once they return:
// meanwhile publishes to it would be unroutable, and copies waiting on
// its rungs or the delay queues would expire into nothing. It is consumed
// again only once they return, so that the queue's handlers never exceed
// its concurrency; what arrives meanwhile waits in the queue.
// It reports whether it declared the queue.
func (c *consumer) awaitWorkers(sub transport.Subscription, alive *sync.WaitGroup) (declared bool) {
	ended, ok := sub.(transport.Ended)
	if !ok || !c.q.declare {
		alive.Wait()
		return false
	}
	returned := make(chan struct{})
	go func() { // ends with the workers, which the caller waits for below
		alive.Wait()
		close(returned)
	}()
	select {
	case <-returned:
		return false
	case <-ended.Ended():
	}
	err := sub.Err()
	select {
	case <-returned:
		return false
	case <-c.e.stop.requested:
	default:
		if errors.Is(err, transport.ErrCancelled) || errors.Is(err, transport.ErrNotFound) {
			declared = c.declareWhileHandlersRun(err)
		}
	}
	<-returned
	c.awaiting.Store(false)
	return declared
}

// declareWhileHandlersRun declares the queue deleted under the server
// while its handlers still run (awaitWorkers). A failure is logged: the
// supervisor declares it again, with backoff, once they return.
func (c *consumer) declareWhileHandlersRun(cause error) bool {
	c.consuming.Store(false)
	c.awaiting.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), c.e.publishTimeout)
	defer cancel()
	if err := c.e.declare(ctx, c.q); err != nil {
		c.e.log.Warn("acemq: the broker ended the consumer; declaring the queue again failed, tried again once its handlers return",
			zap.String("queue", c.q.name), zap.NamedError("ended", cause), zap.Error(err))
		return false
	}
	c.e.log.Error("acemq: the broker ended the consumer; the queue is declared again, and consumed again once the handlers still running return",
		zap.String("queue", c.q.name), zap.Int64("running", c.holding.Load()), zap.Error(cause))
	return true
}
