package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/acemq/acemq/transport"
)

// delayCheckPasses is how many passes of the redelivery loop make one
// check of the delay queues' layout (acemq.DelayCheckEvery).
const delayCheckPasses = 3

// delayCheckGap is the least time between two checks asked for by
// publishes (noticeDelayMissing), so that a burst of copies refused by a
// missing level costs the broker one check, not one per copy.
const delayCheckGap = time.Second

// delayWatch carries the requests to check the delay queues' layout now:
// one waiting at most, the others folded into it. Its zero value is ready.
type delayWatch struct {
	once sync.Once
	kick chan string // the part a publish found missing
}

func (w *delayWatch) requests() chan string {
	w.once.Do(func() { w.kick = make(chan string, 1) })
	return w.kick
}

// noticeDelayMissing asks for the delay queues' layout to be checked now,
// because a delayed publish to part (a level, or the deliver exchange)
// came back unroutable or its exchange missing. It never blocks; a check
// already asked for covers it.
func (e *Engine) noticeDelayMissing(part string) {
	select {
	case e.delayWatch.requests() <- part:
	default:
	}
}

// checkDelays looks for the delay queues' missing queues and exchanges,
// counts each in acemq.retry.rung.missing (attribute rung: its name, kind:
// queue or exchange) and declares the layout again where the server may
// (a queue of it with declare on, and configure rights), binding its own
// queues to it again. Where it may not, it logs the command that
// declares them; the messages are kept meanwhile: a delayed publish to a
// missing level is refused (the Publisher returns the error, a retry or
// snooze copy waits in the process instead), and what a level holds to be
// dead-lettered waits there. asked names the part a publish found
// missing, if one did: the layout is then declared again even when
// nothing is seen missing (a binding, which no passive check sees).
func (e *Engine) checkDelays(queues []*queueRun, asked string) {
	ctx, cancel := context.WithTimeout(context.Background(), e.publishTimeout)
	defer cancel()
	missing, err := e.missingDelays(ctx)
	if err != nil {
		if !errors.Is(err, transport.ErrClosed) {
			e.log.Warn("acemq: check the delay queues", zap.Error(err))
		}
		return
	}
	if len(missing) == 0 && asked == "" {
		return
	}
	for _, m := range missing {
		kind, name := "queue", m
		if x, ok := strings.CutPrefix(m, "exchange "); ok {
			kind, name = "exchange", x
		}
		e.inst.rungMissing.Add(ctx, 1, metric.WithAttributes(attribute.String("rung", name), attribute.String("kind", kind)))
	}
	fields := []zap.Field{zap.Strings("missing", missing)}
	if asked != "" {
		fields = append(fields, zap.String("publish_refused_by", asked))
	}
	fix := "declare them: acemq topology --delays --apply (with --queue Q for each queue of this server, to bind it)"
	if !slices.ContainsFunc(queues, func(q *queueRun) bool { return q.declare }) {
		e.log.Error("acemq: the delay queues are missing parts and this server does not declare (declare is off): a delayed publish to a missing level is refused, "+
			"and what the level above holds to be dead-lettered waits there, neither ready nor unacked; "+fix, fields...)
		return
	}
	if err := e.declareDelays(ctx); err != nil {
		what := "acemq: the delay queues are missing parts and declaring them again failed"
		if errors.Is(err, transport.ErrAccessRefused) {
			what = "acemq: the delay queues are missing parts and this server may not declare them (no configure rights)"
		}
		e.log.Error(what+": a delayed publish to a missing level is refused, and what the level above holds to be dead-lettered waits there; "+fix,
			append(fields, zap.Error(err))...)
		return
	}
	for _, q := range queues {
		if q.delays && q.declare {
			if err := e.bindDelays(ctx, q); err != nil {
				e.log.Warn("acemq: bind a queue to the delay queues again", zap.String("queue", q.name), zap.Error(err))
			}
		}
	}
	if len(missing) == 0 {
		e.log.Info("acemq: declared the delay queues again, since a delayed publish came back unroutable", fields...)
		return
	}
	e.log.Warn("acemq: declared the delay queues' missing parts again; what the levels held to be dead-lettered meanwhile moves on when RabbitMQ next offers it, within about 3 minutes "+
		"(dead_letter_worker_publisher_confirm_timeout)", fields...)
}
