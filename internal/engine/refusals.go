package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/backoff"
	"github.com/acemq/acemq/transport"
)

// refusalLogEvery bounds how often the server logs the broker's refusals
// of its consumers' connections after the first line of a streak: a
// connection per consumer, 200 queues and a backoff that tops out at 10 s
// would otherwise make 20 lines a second.
const refusalLogEvery = 30 * time.Second

// refusals is what the server knows of the broker refusing its consumers'
// connections for now (transport.ErrRefused: a connection limit reached,
// a vhost down, a node not accepting connections). Such a refusal never
// ends Run: the transport dials again with backoff, and the server counts
// each refusal (acemq.connection.refusals), logs the streak (a warn line
// for its first refusal, then at most one every refusalLogEvery, and an
// info line at its end; each queue's own end at debug level), and is not
// ready (CheckReady) while any queue's consumer is refused.
//
// A streak is the server's, not a queue's: it begins with the first queue
// refused while none was, and ends when the last refused queue is
// connected again.
type refusals struct {
	mu       sync.Mutex
	refused  map[string]*transport.RefusedError // by queue, while its consumer is refused
	since    time.Time                          // the streak's first refusal; zero when none
	tries    int                                // refusals in the streak
	loggedAt time.Time                          // the streak's last log line
}

// noteRefusal is ConsumeOptions.OnRefused for queue: err is a refusal,
// nil the reconnect that ends the queue's refusals.
func (e *Engine) noteRefusal(queue string, err error) {
	r := &e.refused
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		if _, ok := r.refused[queue]; !ok {
			return
		}
		delete(r.refused, queue)
		e.log.Debug("acemq: the broker accepts the consumer's connection again; consuming", zap.String("queue", queue))
		if len(r.refused) == 0 {
			e.log.Info("acemq: the broker accepts every consumer's connection again",
				zap.Int("refusals", r.tries), zap.Stringer("refused_for", now.Sub(r.since).Round(time.Millisecond)))
			r.since, r.tries, r.loggedAt = time.Time{}, 0, time.Time{}
		}
		return
	}
	re := asRefused(err)
	e.inst.refusals.Add(context.Background(), 1, metric.WithAttributes(attribute.String("queue", queue), attribute.String("reason", re.Cause)))
	if r.refused == nil {
		r.refused = make(map[string]*transport.RefusedError)
	}
	r.refused[queue] = re
	r.tries++
	switch {
	case r.since.IsZero():
		r.since, r.loggedAt = now, now
		e.log.Warn("acemq: the broker refuses the consumer's connection for now; dialling again with backoff, not ready until it is accepted",
			zap.String("queue", queue), zap.String("cause", re.Cause), zap.String("reason", re.Reason))
	case now.Sub(r.loggedAt) >= refusalLogEvery:
		r.loggedAt = now
		e.log.Warn("acemq: the broker still refuses consumers' connections; dialling again with backoff",
			zap.Int("queues_refused", len(r.refused)), zap.Int("refusals", r.tries),
			zap.Stringer("refused_for", now.Sub(r.since).Round(time.Millisecond)),
			zap.String("queue", queue), zap.String("cause", re.Cause), zap.String("reason", re.Reason))
	}
}

// asRefused is err as a *transport.RefusedError; a transport that said
// ErrRefused without one gets a cause of "refused".
func asRefused(err error) *transport.RefusedError {
	var re *transport.RefusedError
	if errors.As(err, &re) {
		return re
	}
	return &transport.RefusedError{Cause: "refused", Reason: err.Error(), Tries: 1, Since: time.Now()}
}

// check is CheckReady's word on refusals: nil when no queue's consumer is
// refused, else which (the first by name) and why.
func (r *refusals) check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.refused) == 0 {
		return nil
	}
	queues := make([]string, 0, len(r.refused))
	for q := range r.refused {
		queues = append(queues, q)
	}
	slices.Sort(queues)
	re := r.refused[queues[0]]
	more := ""
	if n := len(queues) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d other queue(s))", n)
	}
	return fmt.Errorf("queue %s%s: the broker refuses its consumer's connection for now (%s): %s; dialling again",
		queues[0], more, re.Cause, re.Reason)
}

// consumeRefusable is t.Consume with opts, telling the server of every
// refusal for now, and trying again with backoff when the broker refuses
// the subscription's first connection for now (a Consume with a
// connection of its own), until ctx ends or a stop is requested.
func (e *Engine) consumeRefusable(ctx context.Context, q *queueRun, opts transport.ConsumeOptions) (transport.Subscription, error) {
	opts.OnRefused = func(err error) { e.noteRefusal(q.name, err) }
	for n := 0; ; n++ {
		sub, err := e.t.Consume(ctx, q.name, opts)
		if !errors.Is(err, transport.ErrRefused) {
			if err == nil {
				e.noteRefusal(q.name, nil) // ends a streak noted here or by supervise
			}
			return sub, err
		}
		e.noteRefusal(q.name, err)
		if backoff.Sleep(ctx, nil, resubscribeBackoff.Delay(n), e.stop.requested) != nil {
			return nil, err
		}
	}
}
