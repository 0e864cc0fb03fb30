package middleware_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	"github.com/acemq/acemq/middleware"
)

// A producer's 100 KB id and a reason quoting it make one short line:
// each field is cut to its cap, with its length and the start of its
// sha256 to find the whole by.
func TestLoggingCapsLongFields(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("x", 100<<10)
	core, logs := observer.New(zapcore.DebugLevel)
	h := middleware.Logging(middleware.WithLogger(zap.New(core)))(acemq.HandlerFunc(func(_ context.Context, m *acemq.Message) ack.Ack {
		return ack.DeadLetter(errors.New("no such order " + m.ID()))
	}))
	h.ServeMessage(context.Background(), withID(id))
	all := logs.All()
	if len(all) != 1 {
		t.Fatalf("%d lines, want 1", len(all))
	}
	sum := sha256.Sum256([]byte(id))
	want := "…(102400 bytes, sha256:" + hex.EncodeToString(sum[:8]) + ")"
	total := 0
	for _, f := range all[0].Context {
		total += len(f.String)
	}
	got := all[0].ContextMap()
	if s := got["id"].(string); !strings.HasSuffix(s, want) || len(s) > 256+len(want) {
		t.Errorf("id of %d bytes ending %q, want 256 bytes and %q", len(s), s[max(len(s)-60, 0):], want)
	}
	if s, _ := got["reason"].(string); len(s) > 4<<10+64 || !strings.Contains(s, "bytes, sha256:") {
		t.Errorf("reason of %d bytes, want it cut to 4 KB", len(s))
	}
	if total > 16<<10 {
		t.Errorf("the line carries %d bytes of strings for a 100 KB id", total)
	}
}
