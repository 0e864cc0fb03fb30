package middleware

import (
	"context"
	"runtime/debug"

	"go.uber.org/zap"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/internal/logging"
	"github.com/acemq/acemq/internal/panicked"
)

// PanicError is the failure a recovered panic becomes.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return panicked.Text(e.Value) }

// Recover makes a panic in the handler visible to the middleware around
// it: the panic becomes a retry whose error is a [*PanicError] carrying the
// stack, logged at error level with the message's id. It is not needed for
// safety: the server recovers every panic itself and retries the message
// (see the package doc). It logs to [WithLogger]'s logger; without one,
// to slog.Default().
//
// Recover took its logger as an argument until the logger was given one
// way across acemq (docs/internals.md, "Settings"): Recover(nil) still compiles and
// means the default; Recover(log) is now Recover(WithLogger(log)).
func Recover(opts ...Option) acemq.Middleware {
	log := logging.Or(settingsOf(opts).log)
	return func(next acemq.Handler) acemq.Handler {
		return acemq.HandlerFunc(func(ctx context.Context, m *acemq.Message) (a ack.Ack) {
			defer func() {
				if r := recover(); r != nil {
					err := &PanicError{Value: r, Stack: debug.Stack()}
					log.Error("acemq: handler panicked", zap.String("queue", m.Queue()), zap.String("id", m.ID()),
						zap.Int("attempt", m.Attempt()), zap.Any("panic", r), zap.ByteString("stack", err.Stack))
					a = ack.Retry(err)
				}
			}()
			return next.ServeMessage(ctx, m)
		})
	}
}
