package logging

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acemq/acemq/internal/logging/logtest"
)

// note is the suffix Cut writes for s.
func note(s string) string {
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("…(%d bytes, sha256:%s)", len(s), hex.EncodeToString(sum[:8]))
}

func TestCut(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 1000)
	euro := strings.Repeat("€", 100) // three bytes each
	tests := []struct {
		name, in string
		limit    int
		want     string
	}{
		{"within", "order-1", 256, "order-1"},
		{"at the cap", long[:256], 256, long[:256]},
		{"over", long, 256, long[:256] + note(long)},
		{"a sequence the cut would split", euro, 10, euro[:9] + note(euro)},
		{"a sequence ending at the cut", euro, 9, euro[:9] + note(euro)},
		{"bytes that are no UTF-8", strings.Repeat("\x80", 20), 4, strings.Repeat("\x80", 1) + note(strings.Repeat("\x80", 20))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Cut(tt.in, tt.limit)
			if got != tt.want {
				t.Errorf("Cut(%d bytes, %d) = %.80q…, want %.80q…", len(tt.in), tt.limit, got, tt.want)
			}
			if prefix, _, _ := strings.Cut(got, "…("); utf8.ValidString(tt.in) && !utf8.ValidString(prefix) {
				t.Errorf("the prefix %q splits a UTF-8 sequence", prefix)
			}
		})
	}
}

// Every field a producer can make long is cut on a capped logger, by its
// key's cap; everything else passes as it came.
func TestCappedFields(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("i", 100<<10) // the reported 100 KB id
	reason := "exhausted 3 attempts: " + strings.Repeat("r", 10<<10)
	stack := strings.Repeat("goroutine 1 [running]:\n", 2000)
	core, logs := observer.New(zapcore.DebugLevel)
	l := Capped(zap.New(core))
	l.With(zap.String("queue", "orders"), zap.String("id", id)).Warn("acemq: retry",
		zap.String("reason", reason),
		zap.ByteString("stack", []byte(stack)),
		zap.ByteString("correlation_id", []byte(id)),
		zap.Error(errors.New("claim of "+id+" failed")),
		zap.NamedError("cause", errors.New("short")),
		zap.Int("attempt", 2),
		zap.String("short", "kept"),
	)
	all := logs.All()
	if len(all) != 1 {
		t.Fatalf("%d lines, want 1", len(all))
	}
	got := all[0].ContextMap()
	for _, c := range []struct {
		key, whole string
		limit      int
	}{
		{"id", id, IDCap},
		{"correlation_id", id, IDCap},
		{"reason", reason, TextCap},
		{"stack", stack, StackCap},
		{"error", "claim of " + id + " failed", TextCap},
	} {
		s, _ := got[c.key].(string)
		if want := c.whole[:c.limit] + note(c.whole); s != want {
			t.Errorf("%s: %d bytes %.60q…, want the first %d bytes and the note %s", c.key, len(s), s, c.limit, note(c.whole))
		}
	}
	if got["queue"] != "orders" || got["short"] != "kept" || got["attempt"] != int64(2) || got["cause"] != "short" {
		t.Errorf("the short fields changed: %v", got)
	}
	total := 0
	for _, f := range all[0].Context {
		total += len(f.String)
	}
	if total > 64<<10 {
		t.Errorf("the line still carries %d bytes of strings", total)
	}
}

// A capped logger is capped once: wrapping it again changes nothing, and
// Or caps what it is given and its default.
func TestCappedOnce(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	l := Capped(zap.New(core))
	if Capped(l) != l || Or(l) != l {
		t.Error("a capped logger was wrapped again")
	}
	if _, ok := Or(zap.NewNop()).Core().(*cappedCore); !ok {
		t.Error("Or did not cap the logger it was given")
	}
	if _, ok := Or(nil).Core().(*cappedCore); !ok {
		t.Error("Or's default is not capped")
	}
	l.Debug("below the level", zap.String("id", strings.Repeat("x", 1000)))
	l.Info("written", zap.String("id", strings.Repeat("x", 1000)))
	if all := logs.All(); len(all) != 1 || len(all[0].ContextMap()["id"].(string)) > IDCap+64 {
		t.Errorf("lines %v, want the one at info, capped once", all)
	}
}

// The core below still decides what is written: a sampler samples, a
// level that is off stays off.
func TestCappedKeepsTheCoreBelow(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	sampled := zapcore.NewSamplerWithOptions(core, time.Hour, 2, 0)
	l := Capped(zap.New(sampled))
	for range 10 {
		l.Info("the same line", zap.String("id", strings.Repeat("x", 1000)))
	}
	if n := logs.Len(); n != 2 {
		t.Errorf("%d of 10 identical lines written through a sampler of 2, want 2", n)
	}
}

// Through the slog bridge the fields are capped as well.
func TestCappedThroughSlog(t *testing.T) {
	t.Parallel()
	rec := logtest.New(slog.LevelDebug)
	l := Or(FromSlog(slog.New(rec)))
	id := strings.Repeat("€", 1000)
	l.Info("acemq: handled", zap.String("id", id))
	got := rec.Entries()
	if len(got) != 1 {
		t.Fatalf("%d records, want 1", len(got))
	}
	if s := got[0].Attrs["id"].String(); !strings.HasSuffix(s, note(id)) || len(s) > IDCap+64 || !utf8.ValidString(s) {
		t.Errorf("id %q, want the start of it and %s", s, note(id))
	}
}

// BenchmarkCapped measures what the cap costs a line of short fields,
// the usual line, against the same core unwrapped, and what a line with a
// field to cut costs.
func BenchmarkCapped(b *testing.B) {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	plain := zap.New(zapcore.NewCore(enc, zapcore.AddSync(io.Discard), zapcore.InfoLevel))
	capped := Capped(plain)
	id := "0b3c4f5e-9a8d-4c1b-8e7f-6a5b4c3d2e1f"
	long := strings.Repeat("i", 100<<10)
	for _, bb := range []struct {
		name  string
		l     *zap.Logger
		id    string
		level zapcore.Level
	}{
		{"plain", plain, id, zapcore.InfoLevel},
		{"capped", capped, id, zapcore.InfoLevel},
		{"plain_disabled", plain, id, zapcore.DebugLevel},
		{"capped_disabled", capped, id, zapcore.DebugLevel},
		{"plain_100KB_id", plain, long, zapcore.InfoLevel},
		{"capped_100KB_id", capped, long, zapcore.InfoLevel},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ce := bb.l.Check(bb.level, "acemq: retry"); ce != nil {
					ce.Write(zap.String("queue", "orders"), zap.String("id", bb.id), zap.Int("attempt", 2),
						zap.Duration("wait", time.Second), zap.Error(errBench))
				}
			}
		})
	}
}

var errBench = errors.New("acemq: the handler said: 503 Service Unavailable")
