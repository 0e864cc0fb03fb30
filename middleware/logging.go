package middleware

import (
	"context"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/logging"
)

// Logging writes one line per message with its queue, id, attempt, outcome
// and duration: at debug level for an accept, at info for a retry or a
// requeue, at warn for a dead letter or a park, with the reason. The server
// logs separately, at warn, each message it actually gave up on, and at
// info each retry and snooze with its wait and where it waits. It writes
// to [WithLogger]'s logger; without one, the warnings go to
// slog.Default(), and WithLogger(zap.NewNop()) logs nothing.
//
// Logging took its logger as an argument until the logger was given one
// way across acemq (docs/internals.md, "Settings"): Logging(nil) still compiles and
// means the default; Logging(log) is now Logging(WithLogger(log)).
func Logging(opts ...Option) acemq.Middleware {
	log := logging.Or(settingsOf(opts).log)
	return func(next acemq.Handler) acemq.Handler {
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) ack.Ack {
			began := time.Now()
			a := next.ServeMessage(ctx, m)
			level := zapcore.DebugLevel
			switch a.Outcome() {
			case ack.OutcomeRetry, ack.OutcomeRequeue, ack.OutcomeSnooze:
				level = zapcore.InfoLevel
			case ack.OutcomeDeadLetter, ack.OutcomePark:
				level = zapcore.WarnLevel
			}
			if ce := log.Check(level, "acemq: handled"); ce != nil {
				fields := []zap.Field{
					zap.String("queue", m.Queue()), zap.String("id", m.ID()), zap.Int("attempt", m.Attempt()),
					zap.String("outcome", a.Outcome().String()), zap.Stringer("took", time.Since(began)),
				}
				if d, ok := a.After(); ok {
					fields = append(fields, zap.Stringer("after", d)) // the wait the handler chose
				}
				if a.Err() != nil {
					fields = append(fields, zap.Error(a.Err()))
				}
				if a.Reason() != "" {
					fields = append(fields, zap.String("reason", a.Reason()))
				}
				ce.Write(fields...)
			}
			return a
		})
	}
}
