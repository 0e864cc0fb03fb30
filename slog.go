package acemq

import (
	"log/slog"

	"go.uber.org/zap"

	"github.com/acemq/acemq/internal/logging"
)

// FromSlog returns a *zap.Logger that writes to l's handler, for a service
// that logs with log/slog: every logger this module accepts
// ([Server].Logger, the AMQP transport's WithLogger, the outbox relay's,
// the middleware's) is a *zap.Logger, so that the library has one logging
// path. Levels map to slog's (DPanic, Panic and Fatal above error); a
// duration, a time or an error stays one, an object becomes a group, and
// a zap namespace a group that holds the fields after it. A nil l means
// slog.Default(), as it is when each line is written.
//
// Without a logger the library writes its warnings and errors to
// slog.Default() all the same; pass zap.NewNop() for nothing at all.
func FromSlog(l *slog.Logger) *zap.Logger { return logging.FromSlog(l) }
