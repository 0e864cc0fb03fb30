package acemqtest

import (
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// testLog is the logger a server gets when the test gave it none: its
// warnings and errors (a message given up on, a copy refused, a handler
// cut off) in the test's own log, shown with the test that failed rather
// than on the process's stderr. It falls silent once the test is over: a
// handler the shutdown abandoned may still log as it returns, and a
// testing.TB must not be written to then.
type testLog struct {
	mu   sync.Mutex
	tb   testing.TB
	over bool
}

func newTestLog(tb testing.TB) (*zap.Logger, *testLog) {
	w := &testLog{tb: tb}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.TimeKey = "" // the test's log has its own
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), zap.WarnLevel)
	return zap.New(core), w
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.over {
		w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// end silences the log.
func (w *testLog) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.over = true
}
