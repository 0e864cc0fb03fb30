package engine

import (
	"runtime/debug"
	"strconv"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The one line a Run writes when it starts consuming and the one it writes
// when it has drained: what an on-call engineer looks for first, so each
// says in one place what the run is and how it ended.

// maxQueuesLogged bounds the queue names on the start-up line; the count
// is always there.
const maxQueuesLogged = 20

// logStarted writes the start-up line: the queues consumed, their prefetch
// and concurrency, where waits go, the broker and acemq's version.
func (e *Engine) logStarted(queues []*queueRun) {
	names := make([]string, 0, min(len(queues), maxQueuesLogged))
	prefetch, concurrency := spread{}, spread{}
	declared, delays := 0, 0
	for _, q := range queues {
		if len(names) < maxQueuesLogged {
			names = append(names, q.name)
		}
		prefetch.add(q.prefetch)
		concurrency.add(q.concurrency)
		if q.declare {
			declared++
		}
		if q.delays {
			delays++
		}
	}
	broker := "unknown"
	if e.broker.product != "" {
		broker = e.broker.product + " " + e.broker.version
	}
	e.log.Info("acemq: server started",
		zap.Int("queues", len(queues)), zap.Strings("consuming", names),
		zap.Stringer("prefetch", prefetch), zap.Stringer("concurrency", concurrency),
		zap.Int("declared", declared), zap.Int("on_delay_queues", delays),
		zap.Stringer("handler_timeout", e.handlerTimeout), zap.Stringer("shutdown_timeout", e.shutdownTimeout),
		zap.String("broker", broker), zap.String("acemq", moduleVersion()))
}

// logStopped writes the drain's line: how long the run and its drain took,
// how many deliveries were handled in the run, and how many the stop gave
// back to the broker and cut off. A failure or a cut makes it a warning.
func (e *Engine) logStopped(started time.Time, failure error) {
	level := zapcore.InfoLevel
	if failure != nil || e.stop.cutOff() {
		level = zapcore.WarnLevel
	}
	ce := e.log.Check(level, "acemq: server stopped")
	if ce == nil {
		return
	}
	why := zap.Skip()
	if failure != nil {
		why = zap.Error(failure)
	}
	drained := time.Duration(0)
	if at := e.stop.requestedAt(); !at.IsZero() {
		drained = time.Since(at)
	}
	ce.Write(zap.Int64("handled", e.stop.handled.Load()), zap.Int64("given_back", e.stop.givenBack.Load()),
		zap.Int64("cut_off", e.stop.cutHandlers.Load()), zap.Stringer("drain_took", drained.Round(time.Millisecond)),
		zap.Stringer("ran_for", time.Since(started).Round(time.Millisecond)), why)
}

// spread is the range of a setting over the queues: "32", or "8-32".
type spread struct{ lo, hi int }

func (s *spread) add(n int) {
	if s.lo == 0 || n < s.lo {
		s.lo = n
	}
	s.hi = max(s.hi, n)
}

func (s spread) String() string {
	if s.lo == s.hi {
		return strconv.Itoa(s.hi)
	}
	return strconv.Itoa(s.lo) + "-" + strconv.Itoa(s.hi)
}

// moduleVersion is the version of acemq the binary was built with:
// "(devel)" in acemq's own tests and builds, "unknown" without build info.
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	const path = "github.com/acemq/acemq"
	if bi.Main.Path == path {
		return bi.Main.Version
	}
	for _, m := range bi.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	return "unknown"
}
